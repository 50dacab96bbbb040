"""One node's slow network link: the node whose TCP send queues back up while the others' drain is named as what
the job's exposed transfer waits on (analyzers/slow_link.py), in the communication finding, and as the verdict's
subject with its own first action when no rank is late.

The rule on hand-built samples and on synthetic jobs (benchmarks/job_scale.py) with one slow node link among many,
and one real 2-rank gloo job across two network namespaces whose veth pair is shaped on node 1's side only
(benchmarks/shaped_net.slow_link; root, skips elsewhere with the reason).
"""
import fcntl
import json
import struct
import sys
import termios

import pytest

from conftest import EXAMPLES, REPO, load_summary
from haiprof.analyzers import slow_link as L
from haiprof.collectors import tcp_queues

MB = 1_000_000


def _samples(n=50, backlogged=10, queued=300_000, tx_rate=10 * MB, interval_s=0.1, retrans_rate=0.0):
    """n samples of one host's TCP send queues: `backlogged` of them with `queued` bytes waiting (spread through
    the run), the interfaces sending `tx_rate` bytes/s."""
    every = n / backlogged if backlogged else float("inf")
    out = []
    for i in range(n):
        busy = backlogged and int(i % every) == 0 and i // every < backlogged
        out.append({"t_ns": int(i * interval_s * 1e9), "send_queued_bytes": queued if busy else 0,
                    "tx_bytes": int(i * interval_s * tx_rate), "retrans_segs": int(i * interval_s * retrans_rate)})
    return out


def _per_rank(hosts: dict, ranks_per_host=1) -> list:
    """host -> summarize() figures; each host's ranks read the same figures (its namespace's)."""
    out = []
    for h, tcp in hosts.items():
        for _ in range(ranks_per_host):
            out.append({"rank": len(out), "host": h, "tcp": tcp})
    return out


def test_collector_reads_send_queues_interfaces_and_retransmits(tmp_path):
    net = tmp_path / "net"
    net.mkdir()
    head = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    (net / "tcp").write_text(head +
                             "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 1\n"
                             "   1: 0100000A:D2F0 0200000A:1F90 01 00010000:00000000 01:00000014 00000000 0 0 2\n"
                             "   2: 0100000A:D2F1 0200000A:1F90 01 00000000:00000010 00:00000000 00000000 0 0 3\n")
    (net / "tcp6").write_text(head)
    (net / "dev").write_text("Inter-|   Receive\n face |bytes packets errs drop fifo frame compressed multicast|bytes\n"
                             "    lo: 500 5 0 0 0 0 0 0 500 5 0 0 0 0 0 0\n"
                             "  eth0: 1000 10 0 0 0 0 0 0 2000 20 0 0 0 0 0 0\n")
    (net / "snmp").write_text("Tcp: RtoAlgorithm RetransSegs InErrs\nTcp: 1 42 0\n")
    # the listening socket and lo do not count; the established socket with 64 KiB unacknowledged does
    assert tcp_queues.send_queues(str(tmp_path)) == (0x10000, 1, 2)
    assert tcp_queues.interface_bytes(str(tmp_path)) == (2000, 1000)
    assert tcp_queues.retransmits(str(tmp_path)) == 42
    rec = tcp_queues.TcpQueueSampler(str(tmp_path)).sample()
    assert rec == {"send_queued_bytes": 0x10000, "sockets_queued": 1, "sockets": 2, "tx_bytes": 2000,
                   "rx_bytes": 1000, "retrans_segs": 42}
    ok, why = tcp_queues.TcpQueueSampler.available(str(tmp_path / "none"))
    assert not ok and "net/tcp" in why


def test_collector_samples_a_real_send_queue_in_distributed_ranks_only(monkeypatch):
    import socket
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    ok, why = tcp_queues.TcpQueueSampler.available()
    assert not ok and "distributed" in why      # a single process pays nothing for it
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    ok, why = tcp_queues.TcpQueueSampler.available()
    assert not ok and "first rank" in why       # its node's local rank 0 reads the same counters
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert tcp_queues.TcpQueueSampler.available() == (True, "")
    sampler = tcp_queues.TcpQueueSampler()
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        with socket.create_connection(srv.getsockname()) as c:
            peer, _ = srv.accept()
            with peer:
                c.setblocking(False)
                try:   # the peer never reads: what its receive buffer cannot take stays in our send queue
                    while True:
                        c.send(b"x" * 65536)
                except BlockingIOError:
                    pass
                after = sampler.sample()
                procfs = tcp_queues.send_queues()
                # our own queue, from the kernel: it can only shrink once we stop sending, so each
                # machine-wide reading above held at least this much of it
                ours = struct.unpack("i", fcntl.ioctl(c.fileno(), termios.TIOCOUTQ, b"\0" * 4))[0]
    # the counts are machine-wide: other sockets (a parallel test's ranks) may drain or fill meanwhile,
    # so each reading is held to what it must contain, our socket, not to a difference of two readings
    assert ours > 0 and after["sockets"] >= 2 and after["sockets_queued"] >= 1
    assert after["send_queued_bytes"] >= ours     # netlink sees our queue
    assert procfs[0] >= ours and procfs[1] >= 1   # and procfs reads the same queue


def test_summary_is_the_backlog_share_and_the_rate_while_backlogged():
    s = L.summarize(_samples(n=50, backlogged=25, tx_rate=10 * MB))
    assert s["samples"] == 50 and s["backlog_share"] == 0.5
    assert s["tx_bytes_per_s"] == pytest.approx(10 * MB, rel=0.01)
    assert s["delivery_bytes_per_s"] == pytest.approx(20 * MB, rel=0.01)   # sent in half the time
    # the steady window only: the first half is left out
    late = L.summarize(_samples(n=50, backlogged=0), window=(int(2.5e9), int(5e9)))
    assert late["samples"] == 25 and late["backlog_share"] == 0 and late["delivery_bytes_per_s"] is None
    assert L.summarize([]) == {"samples": 0}


def test_one_slow_node_link_among_many_is_named():
    fast = L.summarize(_samples(n=60, backlogged=6, queued=100_000, tx_rate=6 * MB))   # 60 MB/s while queued
    slow = L.summarize(_samples(n=60, backlogged=48, queued=900_000, tx_rate=6 * MB))  # 7.5 MB/s while queued
    hosts = {f"node{k:03d}": fast for k in range(16)}
    hosts["node011"] = slow
    lk = L.find(_per_rank(hosts, ranks_per_host=8), transfer_ms=100.0)
    assert lk["host"] == "node011" and lk["ranks"] == list(range(88, 96))
    assert lk["backlog_share"] == pytest.approx(0.8) and lk["others_backlog_share"] == pytest.approx(0.1)
    assert lk["delivery_bytes_per_s"] == pytest.approx(7.5 * MB, rel=0.01)
    assert lk["others_delivery_bytes_per_s"] == pytest.approx(60 * MB, rel=0.01)
    assert lk["gain_ms"] == pytest.approx(100 * (1 - 7.5 / 60), rel=0.01)   # a link as fast as the others'
    text = L.evidence_text(lk)
    assert "node node011 (ranks 88-95)" in text and "80% of samples" in text and "7.5 MB/s" in text, text
    assert "Check node node011's network link" in L.action(lk)["title"]


def test_no_single_node_when_the_links_are_alike_or_the_evidence_is_thin():
    alike = L.summarize(_samples(n=60, backlogged=40, queued=900_000, tx_rate=6 * MB))
    # every link equally slow (the both-shaped testbed, a slow fabric): nobody is singled out
    assert L.find(_per_rank({f"node{k}": alike for k in range(8)}), 100.0) is None
    # one host only (the shaped loopback: both ranks behind one namespace): no other node to compare with
    assert L.find(_per_rank({"one": alike}, ranks_per_host=2), 100.0) is None
    fast = L.summarize(_samples(n=60, backlogged=6, queued=100_000, tx_rate=6 * MB))
    # queued more often, but delivering more than half the others' rate: busier, not slower (more to send)
    busy = L.summarize(_samples(n=60, backlogged=18, queued=300_000, tx_rate=12 * MB))   # 40 MB/s while queued
    assert busy["delivery_bytes_per_s"] > L.SLOW_RATE_RATIO * fast["delivery_bytes_per_s"]
    assert L.find(_per_rank({"a": fast, "b": fast, "c": busy}), 100.0) is None
    # 3 of 10 samples against 1 of 10: a ratio of 3, but chance gives that often
    few = L.find(_per_rank({"a": L.summarize(_samples(n=10, backlogged=1, tx_rate=6 * MB)),
                            "b": L.summarize(_samples(n=10, backlogged=3, tx_rate=1 * MB))}), 100.0)
    assert few is None
    assert L.chance(3, 10, 1, 10) > L.CHANCE and L.chance(38, 42, 12, 42) < 1e-6
    # many nodes and samples: the normal approximation agrees with the exact tail near the 5% line (far in the
    # tail it is off by a factor, on the same side of the line)
    for args in ((25, 100, 150, 1500), (15, 100, 150, 1500), (12, 100, 150, 1500)):
        exact = L.chance(*args)
        L.EXACT_UP_TO, saved = 0, L.EXACT_UP_TO
        try:
            approx = L.chance(*args)
        finally:
            L.EXACT_UP_TO = saved
        if exact > 0.01:
            assert approx == pytest.approx(exact, rel=0.2), args
        else:
            assert approx < L.CHANCE and exact < L.CHANCE, args
    # no exposed transfer: nothing waits on any link
    slow = L.summarize(_samples(n=60, backlogged=48, queued=900_000, tx_rate=6 * MB))
    assert L.find(_per_rank({"a": fast, "b": slow}), 0.0) is None


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """Synthetic 32-rank jobs (4 nodes of 8, benchmarks/job_scale.py), communication-bound, with each rank's
    host's TCP figures written into its digest: node002's link slow; every link alike. And a 16-rank job (2 nodes)
    whose rank 9 is late (its input: 60 ms per step) while node000's data waits in its send queues."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from benchmarks import job_scale
    from haiprof.analysis.ranks import analyze_job
    from haiprof.rundir import RunDir
    fast = L.summarize(_samples(n=100, backlogged=10, queued=100_000, tx_rate=6 * MB))
    slow = L.summarize(_samples(n=100, backlogged=80, queued=900_000, tx_rate=6 * MB))
    # two nodes, rank 9 (node001) late by 60 ms of a ~80 ms step: node000's data waits in its queues
    waiting = L.summarize(_samples(n=100, backlogged=60, queued=900_000, tx_rate=6 * MB))
    out = {}
    for name, world, figures, late in (("slow", 32, {"node002": slow}, None), ("alike", 32, {}, None),
                                       ("late", 16, {"node000": waiting}, 9)):
        job = job_scale.build_job(tmp_path_factory.mktemp(name) / "job", world, slow_rank=late)
        for d in sorted(job.glob("rank-*")):
            p = d / "summary.json"
            s = json.loads(p.read_text())
            host = json.loads((d / "meta.json").read_text())["host"]
            s.setdefault("hardware", {})["tcp"] = figures.get(host, fast)
            p.write_text(json.dumps(s))
        out[name] = analyze_job(RunDir(job))
    return out


def test_synthetic_job_names_the_slow_node_link_first(synthetic):
    from haiprof.analyzers.page_invariants import check, page_text
    from haiprof.render import html
    data = synthetic["slow"]
    s = data.summary
    assert s["bottleneck"] == "communication"
    assert s["culprit"]["kind"] == "link" and s["culprit"]["host"] == "node002"
    assert s["culprit"]["ranks"] == list(range(16, 24))
    assert "bound by node node002's network link" in s["headline"], s["headline"]
    first = s["next_steps"][0]
    assert first["title"].startswith("Check node node002's network link / NIC") and first["fix"] is None
    # compression stays offered, for the transfer share
    comm = next(f for f in s["findings"] if f["kind"] == "communication")
    assert comm["fixes"][0] == "compress" and "node node002's link" in comm["message"]
    assert any(a["fix"] == "compress" for a in s["next_steps"][1:])
    page = html.render(data)
    assert check(s, data.meta, page) == []
    # the Ranks panel says it too
    assert "The transfer waits on node node002's link: 80% of samples" in page_text(page)


def test_synthetic_job_with_alike_links_names_no_link(synthetic):
    s = synthetic["alike"].summary
    assert s["bottleneck"] == "communication" and "culprit" not in s
    assert "slow_link" not in s["distributed"] and "network link" not in s["headline"]
    assert s["next_steps"][0]["fix"] == "compress"


@pytest.fixture(scope="module")
def testbed_job(tmp_path_factory):
    """A real 2-rank gloo DDP job across two namespaces, node 1's uplink shaped to 100 Mbit/s, each node under
    `haiprof run -- torchrun --nnodes 2 --node-rank K ...` with its own output directory (rank 1's digest reaches
    rank 0 through the job's store). Samples every 0.1 s: 8 steps of a second give each node ~50 samples."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from benchmarks import shaped_net
    ok, why = shaped_net.slow_link_available()
    if not ok:
        pytest.skip(f"shaped network testbed unavailable: {why}")
    out = tmp_path_factory.mktemp("slowlink")
    with shaped_net.slow_link("100mbit", slow_node=1) as link:
        assert "tbf" in link.nodes[1].qdisc() and "tbf" not in link.nodes[0].qdisc()
        rs = shaped_net.run_job(link, [EXAMPLES / "ddp_comm_bound.py", "--steps", "8", "--batch-size", "16",
                                       "--layers", "2"], haiprof_out=str(out), timeout=200,
                                haiprof_args=("--trace-steps", "0", "--sample-interval", "0.1"))
        hosts = [nd.host for nd in link.nodes]
    assert [r.returncode for r in rs] == [0, 0], [r.stderr[-2000:] for r in rs]
    return load_summary(out / "node0"), hosts


@pytest.mark.timeout(240)
def test_real_job_names_the_rank_behind_the_slow_link(testbed_job):
    s, hosts = testbed_job
    assert {r["host"] for r in s["distributed"]["ranks"]} == set(hosts)   # two nodes, as the merge sees them
    assert s["bottleneck"] == "communication", s["headline"]
    c = s["culprit"]
    assert c["kind"] == "link" and c["host"] == hosts[1] and c["ranks"] == [1], c
    assert f"bound by node {hosts[1]}'s network link" in s["headline"], s["headline"]
    lk = s["distributed"]["slow_link"]
    # 100 Mbit/s is 12.5 MB/s: what node 1 delivered while it had data to send, well under the other node's
    assert 8 * MB < lk["delivery_bytes_per_s"] < 13 * MB, lk
    assert lk["backlog_share"] >= 2 * lk["others_backlog_share"], lk
    first = s["next_steps"][0]
    assert first["title"].startswith(f"Check node {hosts[1]}'s network link / NIC"), first
    comm = next(f for f in s["findings"] if f["kind"] == "communication")
    assert comm["fixes"][:1] == ["compress"] and f"node {hosts[1]}'s link" in comm["message"]


def test_a_late_node_is_named_not_the_backlog_it_leaves_on_others(synthetic):
    """While the others wait for a late rank their data sits in their send queues: that backlog is no link's."""
    s = synthetic["late"].summary
    assert s["culprit"]["subject"] == "rank 9" and s["culprit"]["cause"] == "input"
    waited = s["distributed"]["culprits"][0]["late_share"]
    assert 0.6 - 0.1 < waited    # node000's excess backlog is what waiting for rank 9 explains
    assert "slow_link" not in s["distributed"] and "network link" not in s["headline"]
    # the same backlog with nobody late would be a link (the rule's other conditions hold)
    fast = L.summarize(_samples(n=100, backlogged=10, queued=100_000, tx_rate=6 * MB))
    waiting = L.summarize(_samples(n=100, backlogged=60, queued=900_000, tx_rate=6 * MB))
    per_rank = _per_rank({"node000": waiting, "node001": fast}, ranks_per_host=8)
    assert L.find(per_rank, 10.0)["host"] == "node000" and L.find(per_rank, 10.0, waited) is None
