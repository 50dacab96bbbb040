"""phases.bin (haiprof/phasestore.py): every record back as written, in order; a torn last chunk dropped, the
rest read; a steady training loop costs well under 40 bytes a step."""
from hypothesis import given, settings, strategies as st

from haiprof import phasestore as P

_name = st.sampled_from(["forward", "backward", "optimizer", "dataloader", "@step", "@mem", "gpu:forward", "é"])
_i64 = st.integers(-(2 ** 63), 2 ** 63 - 1)
_plain = st.tuples(_name, _i64, _i64).map(tuple)
_wide = st.tuples(_name, _i64, _i64, st.lists(_i64, max_size=4)).map(lambda t: (t[0], t[1], t[2], *t[3]))
_odd = st.one_of(st.tuples(st.just("@ddp"), st.integers(0, 9), st.integers(0, 9), st.dictionaries(st.text(max_size=3), st.integers())),
                 st.tuples(_name, st.integers(2 ** 63, 2 ** 70), st.integers(0, 5)),
                 st.tuples(_name, st.floats(allow_nan=False, allow_infinity=False), st.integers()),
                 st.lists(st.integers(), min_size=5, max_size=9).map(lambda v: ("many", *v)))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.one_of(_plain, _wide, _odd), max_size=30), max_size=5))
def test_every_record_reads_back_in_order(tmp_path_factory, chunks):
    path = tmp_path_factory.mktemp("ps") / "phases.bin"
    with open(path, "wb") as f:
        for records in chunks:
            f.write(P.encode_chunk(records))
    back, torn = P.read_chunks(path)
    assert torn == 0
    assert back == [list(r) for records in chunks for r in records]


def test_a_torn_last_chunk_is_dropped_and_the_rest_reads(tmp_path):
    a = [("forward", 10, 20), ("@step", 30, 30)]
    b = [("backward", 40, 50)]
    whole = P.encode_chunk(a) + P.encode_chunk(b)
    for cut in (1, 5, len(P.encode_chunk(b)) - 1):
        path = tmp_path / f"p{cut}.bin"
        path.write_bytes(whole[:-cut])
        back, torn = P.read_chunks(path)
        assert back == [list(r) for r in a] and torn == len(P.encode_chunk(b)) - cut
    flipped = bytearray(whole)
    flipped[-2] ^= 0xFF     # a corrupted byte in the last chunk: its CRC says so
    (tmp_path / "bad.bin").write_bytes(bytes(flipped))
    assert P.read_chunks(tmp_path / "bad.bin")[0] == [list(r) for r in a]


def test_tail_reads_only_whole_new_chunks(tmp_path):
    path = tmp_path / "phases.bin"
    tail = P.ChunkTail(path)
    assert tail.read_new() == []
    one, two = P.encode_chunk([("forward", 1, 2)]), P.encode_chunk([("@step", 3, 3), ("backward", 4, 9, 7)])
    path.write_bytes(one + two[:7])
    got = tail.read_new()
    assert [c.records() for c in got] == [[["forward", 1, 2]]] and got[0].marks("@step") == 0
    path.write_bytes(one + two)
    got = tail.read_new()
    assert [c.records() for c in got] == [[["@step", 3, 3], ["backward", 4, 9, 7]]]
    assert got[0].marks("@step") == 1 and got[0].size == 2
    assert tail.read_new() == []


def test_a_steady_loop_costs_under_40_bytes_a_step():
    # The records of a real tiny CPU loop (0.4 ms steps), one chunk per half second as the writer flushes.
    import random
    rng = random.Random(0)
    t, records = 1_411_115_744_858, []
    for step in range(20_000):
        for name, dur in (("optimizer", 55_000), ("forward", 53_000), ("backward", 418_000), ("@backward", 0),
                          ("optimizer", 147_000), ("@step", 0)):
            d = int(dur * rng.uniform(0.9, 1.3))
            records.append((name, t, t + d))
            t += d + rng.randint(5_000, 40_000)
    size = sum(len(P.encode_chunk(records[i:i + 7500])) for i in range(0, len(records), 7500))
    assert size / 20_000 < 40, size / 20_000
