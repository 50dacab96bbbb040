"""A damaged or forged chunk in the middle of phases.bin costs its own records only: every good chunk around it
is read, `haiprof report` still writes the report, and the skip is said (a warning, the report's status)."""
import json
import shutil
import struct
import zlib

import pytest

from conftest import load_summary, run_haiprof
from haiprof import phasestore as P
from haiprof.phaseframes import HEAD, MAGIC, whole_chunks

SLOW_LOOP = """\
import time, torch
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(40):   # a flush every half second: several chunks
    opt.zero_grad()
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    time.sleep(0.05)
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("damage")
    (base / "loop.py").write_text(SLOW_LOOP)
    r = run_haiprof("run", "--quiet", "--trace-steps", "0", "--out", base / "run", base / "loop.py")
    assert r.returncode == 0, r.stderr
    chunks = [(offset, nbytes, h["marks"].get("@step", 0)) for h, _, nbytes, offset in
              whole_chunks(base / "run" / "phases.bin")]
    assert len(chunks) >= 3 and sum(c[2] for c in chunks) == 40, chunks
    return base / "run", chunks


def _forged(n: int, nx: int = 0) -> bytes:
    """A chunk whose CRC checks out but whose header announces rows its payload cannot hold."""
    header = json.dumps({"n": n, "names": ["@step"], "base": 0, "nx": nx, "marks": {"@step": n},
                         "extra": []}).encode()
    payload = zlib.compress(b"\0" * 64)
    return HEAD.pack(MAGIC, len(header), len(payload), zlib.crc32(header + payload)) + header + payload


def _report_of_damaged(run, tmp_path, damage):
    src, chunks = run
    d = tmp_path / "run"
    shutil.copytree(src, d)
    data = bytearray((d / "phases.bin").read_bytes())
    offset, nbytes, steps = chunks[len(chunks) // 2]
    damage(data, offset, nbytes)
    (d / "phases.bin").write_bytes(bytes(data))
    r = run_haiprof("report", "--quiet", d)
    assert r.returncode == 0, r.stderr
    assert "haiprof: warning: phases.bin:" in r.stderr and "damaged" in r.stderr, r.stderr
    s = load_summary(d)
    assert "damaged" in s["collectors"]["phases.bin"]["reason"]
    assert (d / "report.html").is_file() and "damaged place" in (d / "report.html").read_text()
    return s, 40 - steps


def test_a_corrupted_middle_chunk_costs_its_own_steps_only(run, tmp_path):
    def flip(data, offset, nbytes):
        data[offset + nbytes // 2] ^= 0xFF   # in its payload: the CRC says so
    s, kept = _report_of_damaged(run, tmp_path, flip)
    assert s["steps"] == kept


def test_a_huge_length_in_a_middle_chunk_sizes_no_read_and_the_rest_is_read(run, tmp_path):
    def huge(data, offset, nbytes):
        struct.pack_into("<I", data, offset + 4, 0xFFFFFFF0)   # its header length: past the file's end
    s, kept = _report_of_damaged(run, tmp_path, huge)
    assert s["steps"] == kept


@pytest.mark.parametrize("n", [10 ** 14, 2 ** 70])
def test_a_forged_header_never_sizes_the_arrays(run, tmp_path, n):
    src, chunks = run
    data = (src / "phases.bin").read_bytes()
    at = chunks[1][0]
    forged = _forged(n)
    (tmp_path / "phases.bin").write_bytes(data[:at] + forged + data[at:])
    cols, skipped = P.read_columns(tmp_path / "phases.bin")
    assert (skipped, skipped.middle, skipped.places, skipped.tail) == (len(forged), len(forged), 1, 0)
    assert cols.records() == P.read_chunks(src / "phases.bin")[0]     # every real record, in order


def test_a_payload_that_does_not_hold_its_header_is_skipped_not_fatal(tmp_path):
    good = P.encode_chunk([("forward", 1, 2), ("@step", 3, 3)])
    header = json.dumps({"n": 3, "names": ["x"], "base": 0, "nx": 0, "extra": []}).encode()
    payload = zlib.compress(b"\1" * 20)   # 20 bytes, not 3 rows' 54
    bad = HEAD.pack(MAGIC, len(header), len(payload), zlib.crc32(header + payload)) + header + payload
    (tmp_path / "phases.bin").write_bytes(good + bad + good)
    records, skipped = P.read_chunks(tmp_path / "phases.bin")
    assert records == [["forward", 1, 2], ["@step", 3, 3]] * 2 and skipped.middle == len(bad)
