"""The storage device's parallel read rate: the files the loader read (noted by the side sampler), read after the run
with one reader and with the N the prefetch fix would start, and the prefetch what-if's point set by the measured
speedup instead of assuming N readers read N times faster."""
import hashlib
import os

import numpy as np
import pytest

from haiprof.analyzers import whatif
from haiprof.analyzers.input_split import MIN_READ_RATE
from haiprof.collectors import read_probe
from haiprof.collectors.open_files import OpenFiles

from conftest import EXAMPLES, load_summary, run_haiprof


def _data_file(path, mib=8):
    with open(path, "wb") as f:
        f.write(os.urandom(mib << 20))
        f.flush()
        os.fsync(f.fileno())   # dirty pages cannot be dropped: the probe's reads must reach the device
    return [str(path), mib << 20]


def test_the_probe_reads_a_real_file_with_one_and_n_readers_and_never_writes_it(tmp_path):
    f = _data_file(tmp_path / "shard.bin")
    before, mtime = hashlib.sha256(open(f[0], "rb").read()).hexdigest(), os.stat(f[0]).st_mtime_ns
    p = read_probe.measure([f], 4)
    if p is None:
        pytest.skip(f"neither O_DIRECT nor posix_fadvise reads work on {tmp_path}'s filesystem")
    assert p["readers"] == 4 and p["block"] == read_probe.BLOCK and p["files"] == 1 and p["file_bytes"] == f[1]
    assert p["mode"] in ("O_DIRECT", "fadvise") and p["one_bytes_per_s"] > 0 and p["many_bytes_per_s"] > 0
    assert p["speedup"] == pytest.approx(p["many_bytes_per_s"] / p["one_bytes_per_s"])
    assert len(p["speedups"]) == read_probe.ROUNDS and p["speedups"] == sorted(p["speedups"])
    assert hashlib.sha256(open(f[0], "rb").read()).hexdigest() == before and os.stat(f[0]).st_mtime_ns == mtime
    # a file gone or changed since the run is not read: nothing left, no probe
    assert read_probe.measure([[f[0], f[1] + 1], [str(tmp_path / "gone.bin"), f[1]]], 4) is None


def test_the_sampler_notes_files_open_for_reading_and_memory_mapped_once(tmp_path):
    read, mapped, written = (_data_file(tmp_path / n, 2) for n in ("read.bin", "mapped.bin", "written.bin"))
    small = tmp_path / "small.bin"
    small.write_bytes(b"x" * 1000)
    with open(read[0], "rb"), open(small, "rb"), open(written[0], "ab"):
        m = np.memmap(mapped[0], mode="r", dtype=np.uint8)
        scan = OpenFiles()
        found = scan.scan([os.getpid()])
        assert sorted(found) == sorted([read, mapped])   # not the file open for writing, nor one under a block
        assert scan.scan([os.getpid()]) == []             # noted once
        del m


def _storage_run(probe: dict | None = None) -> dict:
    """A loader on the training thread waiting on local reads: 80 ms a fetch at 10% CPU, a 100 ms step (20 ms of
    compute), 8 cores: the fix starts 16 workers."""
    s = {"step_time_s": {"steady": 0.1}, "steps": 100, "script_uses": {}, "conditions": {},
         "device": {"timeline": "device", "bound": {"io": 0.8}, "busy": {"h2d": 0.05, "forward": 0.1},
                    "idle_by_host": {"dataloader": 0.75}, "busy_share": 0.15},
         "findings": [{"kind": "io", "share": 0.8, "fixes": ["prefetch"], "evidence": {"input_split": {
             "cores": 8, "workers": {"workers": 0}, "loader_cpu_share": 0.1, "proc_read_bytes_per_s": 84 * 2**20,
             "loader_thread": {"waits": 10, "wall_s": 0.8, "cpu_s": 0.08}}}}],
         "phase_share": {"dataloader": 0.75, "h2d": 0.05, "forward": 0.2}}
    return {**s, "read_probe": probe} if probe else s


def test_a_measured_parallel_read_rate_sets_the_storage_loaders_prediction():
    assumed = whatif.predict("prefetch", _storage_run())
    assert whatif.read_probe_readers(_storage_run()) == 16   # the probe is asked for, with the fix's workers
    assert "its parallel rate is not measured" in assumed["assumed"]
    probe = {"readers": 16, "one_bytes_per_s": 84 * 2**20, "many_bytes_per_s": 110 * 2**20,
             "speedup": 110 / 84, "speedups": [1.2, 1.4], "files": 4, "mode": "O_DIRECT", "block": 1 << 20}
    p = whatif.predict("prefetch", _storage_run(probe))
    assert whatif.read_probe_readers(_storage_run(probe)) is None   # measured once
    # 80 ms a fetch: its 72 ms wait over 1.31x, 55 ms a batch (its 8 ms of CPU spread over the cores), where 16
    # readers were assumed 16x faster (20 ms: the compute)
    assert p["step_after_s"] == pytest.approx(0.072 / (110 / 84))
    assert p["low_share"] == pytest.approx((0.1 - 0.072 / 1.2) / 0.1)
    assert p["high_share"] == pytest.approx((0.1 - 0.072 / 1.4) / 0.1)
    assert p["gain_share"] < assumed["gain_share"]
    assert "the device read 84 MiB/s with one reader, 110 MiB/s with 16: 1.3x (1.2-1.4x" in p["assumed"]
    # a device faster with more readers than the fix starts is held to the workers
    fast = whatif.predict("prefetch", _storage_run({**probe, "speedup": 40.0, "speedups": [30.0, 50.0]}))
    assert fast["step_after_s"] == pytest.approx(0.02)
    why = whatif.predict("prefetch", _storage_run({"not_measured": "the run was recorded on another machine"}))
    assert why["gain_share"] == pytest.approx(assumed["gain_share"])
    assert "its parallel rate is not measured: the run was recorded on another machine" in why["assumed"]
    # the bundled example on a 2-core VM: 43% of each fetch is CPU, the volume reads no faster for 8 readers (0.9x);
    # the workers still overlap one's CPU with another's wait: the step is the wait over 0.9x, not the fetch
    busy = _storage_run({**probe, "readers": 8, "speedup": 0.9, "speedups": [0.8, 1.2]})
    split = busy["findings"][0]["evidence"]["input_split"]
    split.update(cores=2, loader_cpu_share=0.43, loader_thread={"waits": 10, "wall_s": 0.8, "cpu_s": 0.344})
    q = whatif.predict("prefetch", busy)
    assert q["step_after_s"] == pytest.approx(0.08 * 0.57 / 0.9) and q["step_after_s"] < 0.08 / 0.9


def test_a_process_that_read_nothing_is_not_predicted_from_the_disks_rate():
    """proc_read_bytes_per_s 0: the training processes read nothing in the steady steps (a loader that waits on a
    remote fetch); the disk's rate over the whole run (another process, torch's import) is not the loader's."""
    s = _storage_run()
    split = s["findings"][0]["evidence"]["input_split"]
    split.update(proc_read_bytes_per_s=0.0, disk_read_bytes_per_s=84 * 2**20)
    p = whatif.predict("prefetch", s)
    assert "local storage" not in p["assumed"] and whatif.read_probe_readers(s) is None, p["assumed"]
    split.pop("proc_read_bytes_per_s")   # not measured: the disk's rate is the evidence left
    assert "local storage" in whatif.predict("prefetch", s)["assumed"]


def test_the_probe_is_kept_in_the_run_directory_and_measured_only_on_the_same_machine(tmp_path, monkeypatch):
    from haiprof.analysis import read_parallel
    from haiprof.collectors.matmul_peak import cpu_model

    f = _data_file(tmp_path / "shard.bin", 2)
    samples = [{"t_ns": 1}, {"t_ns": 2, "read_files": [f]}, {"t_ns": 3, "read_files": [f]}]
    calls = []
    monkeypatch.setattr(read_probe, "measure", lambda files, n: calls.append((files, n)) or {"speedup": 1.5})
    here = {"host": __import__("socket").gethostname(), "cpu_model": cpu_model(), "exit_code": 0}   # the run ended
    s = _storage_run()
    read_parallel.attach(tmp_path, here, s, samples)
    assert calls == [([f], 16)] and s["read_probe"] == {"speedup": 1.5}
    again = _storage_run()
    read_parallel.attach(tmp_path, {"host": "elsewhere"}, again, [])   # kept: a later report quotes the same
    assert again["read_probe"] == {"speedup": 1.5} and len(calls) == 1
    (tmp_path / read_parallel.READ_PROBE).unlink()
    elsewhere = _storage_run()
    read_parallel.attach(tmp_path, {"host": "elsewhere"}, elsewhere, samples)
    assert elsewhere["read_probe"] == {"not_measured": "the run was recorded on another machine"}
    none = _storage_run()
    read_parallel.attach(tmp_path, here, none, [{"t_ns": 1}])
    assert "no data file was seen" in none["read_probe"]["not_measured"] and len(calls) == 1
    live = {**_storage_run(), "snapshot": True}   # a snapshot while the script runs: never read beside it
    running = {**here, "exit_code": None, "pid": os.getpid()}   # no end yet, its process alive (this one)
    read_parallel.attach(tmp_path, running, live, samples)
    assert "still in progress" in live["read_probe"]["not_measured"] and len(calls) == 1


@pytest.fixture(scope="module")
def storage_run(tmp_path_factory):
    """The bundled storage example once, its shards kept in a folder (as real data outlives the script)."""
    tmp = tmp_path_factory.mktemp("storage")
    out = tmp / "run"
    r = run_haiprof("run", "--quiet", "--sample-interval", "0.2", "--out", out, EXAMPLES / "input_bound_storage.py",
                    "--batches", "20", "--data", tmp / "shards", timeout=300)
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.slow
def test_the_storage_example_probes_the_shards_it_read_and_quotes_the_rates(storage_run):
    s = load_summary(storage_run)
    io = next(f for f in s["findings"] if f["kind"] == "io")
    assert io["evidence"]["input_bound"] == "storage", io["evidence"]
    if (io["evidence"]["input_split"].get("proc_read_bytes_per_s") or 0) < MIN_READ_RATE:
        pytest.skip("no local reads were counted (tmpfs): a latency-bound loader, the device is not probed")
    probe = s["read_probe"]
    assert probe.get("speedup"), probe   # measured, on the shard files the sampler saw open
    assert probe["files"] >= 1 and probe["readers"] >= 2 and (storage_run / "read_probe.json").is_file()
    p = s["predictions"]["prefetch"]
    one, many = probe["one_bytes_per_s"] / 2**20, probe["many_bytes_per_s"] / 2**20
    assert f"the device read {one:.0f} MiB/s with one reader, {many:.0f} MiB/s with {probe['readers']}" \
        in p["assumed"]
    # a later report quotes the same rates, without probing again
    r = run_haiprof("report", "--quiet", storage_run)
    assert r.returncode == 0, r.stderr
    assert load_summary(storage_run)["read_probe"] == probe
