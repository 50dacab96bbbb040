"""The end-of-job gather without a shared filesystem: only digests travel, and the store holds a bounded number
of bytes whatever the world size. Real torch.distributed HashStore, wrapped to count what is set, read and held;
every rank is a thread running the real RankGather, each "node" a directory of its own."""
import io
import json
import os
import tarfile
import threading

import pytest
from torch.distributed import HashStore

from haiprof.runtime import rank_gather as G
from haiprof.rundir import DIGEST_FILES

RAW = ("phases.bin", "samples/system.jsonl", "trace.json")


class CountingStore:
    """A HashStore that counts the bytes set, read and held (set and not yet deleted), and keeps the peak."""

    def __init__(self):
        self.inner, self.lock = HashStore(), threading.Lock()
        self.held, self.peak, self.set_bytes, self.get_bytes, self.values = {}, 0, 0, 0, []

    def set(self, key, value):
        data = value.encode() if isinstance(value, str) else bytes(value)
        with self.lock:
            self.inner.set(key, data)
            self.held[key] = len(data)
            self.set_bytes += len(data)
            self.peak = max(self.peak, sum(self.held.values()))
            self.values.append((key, data))

    def get(self, key):
        data = self.inner.get(key)
        with self.lock:
            self.get_bytes += len(data)
        return data

    def add(self, key, n):
        return self.inner.add(key, n)

    def check(self, keys):
        return self.inner.check(keys)

    def delete_key(self, key):
        with self.lock:
            self.held.pop(key, None)
            return self.inner.delete_key(key)


def _rank_dir(path, rank, digest_kb=120):
    """A rank directory as a rank leaves it: digest files and (much larger) raw data."""
    (path / "samples").mkdir(parents=True)
    (path / "meta.json").write_text(json.dumps({"rank": rank, "host": f"node{rank // 8}", "run_dir": str(path)}))
    (path / "summary.json").write_text(json.dumps({"pad": os.urandom(digest_kb * 512).hex()}))  # incompressible
    (path / "steps.npz").write_bytes(os.urandom(8_000))
    (path / "status.jsonl").write_text("{}\n")
    for name in RAW:
        (path / name).write_bytes(os.urandom(400_000))


@pytest.mark.parametrize("world", [48])
def test_store_holds_at_most_in_flight_digests_and_never_raw_files(tmp_path, monkeypatch, world):
    monkeypatch.setattr(G, "IN_FLIGHT", 4)
    env = {"MASTER_ADDR": "x", "MASTER_PORT": "1", "TORCHELASTIC_RUN_ID": "t", "HAIPROF_GATHER_TIMEOUT": "60"}
    store = CountingStore()
    job = tmp_path / "node0"
    rank0 = G.RankGather(job, 0, world, env=env, store=store)
    (job / "rank-0").mkdir(parents=True)
    (job / "rank-0" / "meta.json").write_text(json.dumps({"gather_token": rank0.token}))
    rank0.start()
    senders, results = [], {}
    for r in range(1, world):
        node = tmp_path / f"node{r}"          # no shared filesystem: rank 0's meta.json is not visible from here
        _rank_dir(node / f"rank-{r}", r)
        g = G.RankGather(node, r, world, env=env, store=store)
        t = threading.Thread(target=lambda g=g, p=node / f"rank-{r}", r=r: results.__setitem__(r, g.send(p)))
        senders.append(t)
        t.start()
    threading.Event().wait(1.0)              # every sender is waiting for a slot before rank 0 starts reading
    record = rank0.collect()
    for t in senders:
        t.join(30)
    assert set(results.values()) == {"store"}, results
    assert all(v.startswith("store (") for v in record["ranks"].values()), record
    digest = max(len(v) for k, v in store.values if "/data/" in k)
    # the bound: IN_FLIGHT digests at a time plus the small words, whatever the world size
    assert store.peak <= G.IN_FLIGHT * digest + world * 64 + 200, (store.peak, digest)
    assert store.set_bytes >= (world - 1) * digest * 0.9          # all of them did pass, a few at a time
    assert store.held.keys() <= {k for k in store.held if k.endswith("token0")}   # rank 0 deleted what it read
    # only digest files went through the store, and only they reached rank 0's directory
    for key, value in store.values:
        if "/data/" in key:
            with tarfile.open(fileobj=io.BytesIO(value), mode="r:gz") as tar:
                assert set(tar.getnames()) <= set(DIGEST_FILES), tar.getnames()
    for r in range(1, world):
        got = {p.relative_to(job / f"rank-{r}").as_posix() for p in (job / f"rank-{r}").rglob("*") if p.is_file()}
        assert got == set(DIGEST_FILES), got


def test_a_digest_over_the_cap_stays_on_its_node(tmp_path, monkeypatch):
    monkeypatch.setattr(G, "MAX_DIGEST_BYTES", 50_000)
    env = {"MASTER_ADDR": "x", "MASTER_PORT": "1", "HAIPROF_GATHER_TIMEOUT": "5"}
    store = CountingStore()
    _rank_dir(tmp_path / "n1" / "rank-1", 1)
    how = G.RankGather(tmp_path / "n1", 1, 2, env=env, store=store).send(tmp_path / "n1" / "rank-1")
    assert how.startswith("too large") and "kept on this node" in how
    assert not any("/data/" in k for k, _ in store.values)
