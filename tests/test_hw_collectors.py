"""Hardware collectors: real sources on this host, fixture trees (tests/data/, formats in its README) elsewhere."""
import os
import shutil
from pathlib import Path

import pytest

from haiprof.analyzers import links, numa as numa_analysis
from haiprof.collectors import membw, rapl
from haiprof.collectors.gpu_nvml import NvmlSampler
from haiprof.collectors.infiniband import InfinibandSampler, NicSampler
from haiprof.collectors.numa import NumaSampler
from haiprof.collectors.storage import DiskstatsSampler, parse_diskstats

DATA = Path(__file__).parent / "data"


def _copy(name, tmp_path):
    dst = tmp_path / name
    shutil.copytree(DATA / name, dst, symlinks=True)
    return dst


# -- real sources --------------------------------------------------------------------------------------------
def test_diskstats_real_host_counts_grow_after_a_synced_write(tmp_path):
    assert DiskstatsSampler.available() == (True, "")
    s = DiskstatsSampler()
    assert s.devices, "no whole disk found in /proc/diskstats"
    assert not any(d.startswith(("loop", "ram", "zram")) for d in s.devices)
    a = s.sample()
    with open(tmp_path / "f", "wb") as f:
        f.write(os.urandom(1 << 20))
        f.flush()
        os.fsync(f.fileno())
    b = s.sample()
    for dev in s.devices:
        assert len(a["devices"][dev]) == 6
        assert all(y >= x for x, y in zip(a["devices"][dev], b["devices"][dev]))


def test_diskstats_fixture_layout_skips_partitions_and_loops():
    root = DATA / "diskstats_nvme"
    s = DiskstatsSampler(proc_root=str(root / "proc"), sysfs_root=str(root / "sys"))
    assert s.devices == ["nvme0n1", "sda"]
    rec = s.sample()["devices"]
    # reads, sectors read, writes, sectors written, ms doing I/O, in flight (iostats.rst fields 1, 3, 5, 7, 10, 9)
    assert rec["nvme0n1"] == [184312, 39201936, 912345, 88231242, 412300, 2]
    assert parse_diskstats("   8 0 sda 1 2\n") == {}  # truncated line: ignored, not a crash


def test_numa_real_node0_and_own_placement():
    assert NumaSampler.available() == (True, "")
    s = NumaSampler(os.getpid())
    rec = s.sample()
    assert "0" in rec["nodes"]
    assert set(rec["nodes"]["0"]) >= {"numa_hit", "numa_miss", "local_node", "other_node"}
    pids = [p["pid"] for p in rec["placement"]["processes"]]
    assert pids[0] == os.getpid()
    assert rec["placement"]["processes"][0]["cpus"]
    assert "placement" not in s.sample()  # same process set: placement is not repeated


def test_rapl_absent_or_readable_here():
    ok, reason = rapl.RaplSampler.available()
    if not Path("/sys/class/powercap").is_dir():
        assert not ok and "powercap" in reason
    elif ok:
        assert rapl.RaplSampler().sample()["zones"]
    else:
        assert reason


def test_nvml_unavailable_reason_without_driver():
    try:
        import torch
        if torch.cuda.is_available():
            pytest.skip("a GPU is present: covered by the gpu tests")
    except ImportError:
        pass
    ok, reason = NvmlSampler.available()
    assert not ok
    assert "NVML library" in reason or "driver" in reason
    with pytest.raises(RuntimeError, match="NVML"):
        NvmlSampler(os.getpid())


def test_membw_reason_here_and_perf_event_open_for_real():
    ok, reason = membw.MemBandwidthSampler.available()
    if not membw.find_counters("/sys"):
        assert not ok and "uncore" in reason and "perf_event_paranoid" in reason
    # The ctypes perf_event_open path, on a counter every kernel offers: our own task clock (software PMU).
    fd = membw.perf_event_open(1, 1, 0, -1)  # PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, this process
    try:
        a = membw.read_counter(fd)
        sum(i * i for i in range(200000))
        b = membw.read_counter(fd)
        assert b > a
    finally:
        os.close(fd)


# -- fixture trees -------------------------------------------------------------------------------------------
def test_perf_vm_fixture_reason():
    ok, reason = membw.MemBandwidthSampler.available(str(DATA / "perf_vm/sys"), str(DATA / "perf_vm/proc"))
    assert not ok
    assert "no memory-controller PMU" in reason and "software" in reason and "perf_event_paranoid=2" in reason


def test_perf_uncore_fixture_encodes_intel_and_amd_events():
    counters = {(c["pmu"], c["direction"]): c for c in membw.find_counters(str(DATA / "perf_uncore/sys"))}
    imc = counters[("uncore_imc_0", "read")]
    assert (imc["type"], imc["config"], imc["cpu"]) == (13, 0x0304, 0)
    assert imc["bytes_per_count"] == pytest.approx(64.0)
    assert counters[("uncore_imc_0", "write")]["config"] == 0x0C04
    assert counters[("amd_umc_0", "read")]["config"] == 0x10A
    assert counters[("amd_umc_0", "write")]["config"] == 0x20A


def test_infiniband_mlx5_two_ports_with_wrap(tmp_path):
    root = _copy("hca_mlx5", tmp_path) / "sys"
    assert InfinibandSampler.available(str(root)) == (True, "")
    s = InfinibandSampler(str(root))
    first = s.sample()
    assert sorted(first["ports"]) == ["mlx5_0/1", "mlx5_0/2"]
    assert first["ports"]["mlx5_0/1"]["rate_gbps"] == 100.0
    assert first["ports"]["mlx5_0/2"]["state"] == "4: ACTIVE"
    # One second later: port 1 moved 2.5 GB (64-bit), port 2's 32-bit xmit counter wrapped past 2^32.
    cnt = root / "class/infiniband/mlx5_0/ports"
    (cnt / "1/counters/port_xmit_data").write_text(str(98765432101 + 625_000_000))
    (cnt / "2/counters/port_xmit_data").write_text(str(4294000000 + 2_000_000 - 2**32))
    second = s.sample()
    first["t_ns"], second["t_ns"] = 0, 1_000_000_000
    summary, series = links.analyze([first, second], [])
    p1, p2 = summary["infiniband"]["mlx5_0/1"], summary["infiniband"]["mlx5_0/2"]
    assert p1["tx_bytes_per_s_mean"] == pytest.approx(2.5e9)
    assert p1["peak_share_of_capacity"] == pytest.approx(2.5e9 / 12.5e9)
    assert p2["tx_bytes_per_s_mean"] == pytest.approx(8e6)
    assert p2["counter_notes"]["wrapped"] == 1


def test_infiniband_32bit_saturation_is_flagged():
    mk = lambda t, v: {"t_ns": t, "ports": {"mlx4_0/1": {"xmit_words": v, "rcv_words": 0, "width": 32,
                                                        "rate_gbps": 40.0}}}
    summary, _ = links.analyze([mk(0, 4_000_000_000), mk(10**9, 2**32 - 1)], [])
    found = links.findings(summary, 0.8)
    assert any("saturated" in f["message"] for f in found)


def test_nics_from_fixture_skip_virtual_interfaces():
    root = DATA / "hca_mlx5/sys"
    s = NicSampler(str(root))
    rec = s.sample()["nics"]
    assert sorted(rec) == ["eth0", "ib0"]  # lo has no device link
    assert rec["eth0"]["speed_mbps"] == 10000 and rec["eth0"]["rx_bytes"] == 1000000


def test_numa_two_nodes_gpu_on_node1_workers_pinned_to_node0(tmp_path):
    root = _copy("numa2host", tmp_path)
    s = NumaSampler(4242, sysfs_root=str(root / "sys"), proc_root=str(root / "proc"), exclude_pids=set())
    a = s.sample()
    assert sorted(a["nodes"]) == ["0", "1"]
    assert [p["pid"] for p in a["placement"]["processes"]] == [4242, 4250, 4251]
    node1 = root / "sys/devices/system/node/node1/numastat"
    text = node1.read_text().replace("other_node 145678", f"other_node {145678 + 25600}")
    node1.write_text(text.replace("local_node 812200000", f"local_node {812200000 + 230400}"))
    b = s.sample()
    a["t_ns"], b["t_ns"] = 0, 2_000_000_000
    cross = numa_analysis.cross_node([a, b])
    assert cross["nodes"] == 2
    assert cross["cross_node_bytes_per_s"] == pytest.approx(25600 * 4096 / 2)
    assert cross["cross_node_share"] == pytest.approx(0.1)
    place = numa_analysis.placement([a, b], [])
    found = numa_analysis.findings(cross, place, 0.10)
    kinds = [f["kind"] for f in found]
    assert "numa" in kinds
    gpu = [f for f in found if f["kind"] == "placement" and "GPU" in f["message"]]
    assert len(gpu) == 1 and gpu[0]["severity"] == "moderate"
    assert {p["pid"] for p in gpu[0]["evidence"]["processes"]} == {4250, 4251}  # main process is not pinned
    assert "node [1]" in gpu[0]["message"] and "numactl --cpunodebind=1" in gpu[0]["message"]


def test_rapl_fixture_top_level_zones_and_wrap(tmp_path):
    root = _copy("rapl_2pkg", tmp_path) / "sys"
    assert rapl.RaplSampler.available(str(root)) == (True, "")
    s = rapl.RaplSampler(str(root))
    a = s.sample()
    assert sorted(a["zones"]) == ["intel-rapl:0", "intel-rapl:1"]  # sub-zones (core, dram) would double count
    zone0 = root / "class/powercap/intel-rapl:0/energy_uj"
    zone0.write_text(str(262143000000 + 100_000_000 - 262143328850))  # 100 J later, past max_energy_range_uj
    (root / "class/powercap/intel-rapl:1/energy_uj").write_text(str(5000000 + 50_000_000))
    b = s.sample()
    a["t_ns"], b["t_ns"] = 0, 1_000_000_000
    from haiprof.analyzers import energy
    segs = energy.rapl_segments([a, b])
    assert sorted(w for _, _, w in segs) == pytest.approx([50.0, 100.0])
