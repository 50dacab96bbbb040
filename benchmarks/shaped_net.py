"""A real slow network on one machine: a private network namespace whose loopback is shaped with `tc`.

Processes started inside the namespace talk over its own `lo`, which a token-bucket filter limits (default
1 Gbit/s), so a gloo DDP job on one host pays for its gradient traffic the way a job across a slow link does.
Needs root (CAP_NET_ADMIN) and iproute2 (`ip`, `tc`). Importable:

    from benchmarks.shaped_net import shaped_loopback, available
    ok, why = available()
    with shaped_loopback(rate="1gbit") as net:
        subprocess.run(net.command(["torchrun", "--nproc-per-node", "2", "train.py"]), env=net.env())

The namespace is created on entry and deleted on exit, even when the body raises. Run as a script to time a
DDP (or FSDP) example with and without shaping:  python -m benchmarks.shaped_net [--rate 1gbit] [--example fsdp]

One slow link among fast ones (`slow_link`): two "nodes", each a network namespace with its own host name (a UTS
namespace per command), joined by a veth pair; a tbf on ONE node's veth end shapes what that node sends (its
uplink), the other direction stays unshaped. A 2-rank job across them pays the slow direction at every ring
allreduce, the way a job with one node on a degraded NIC or port does:

    with slow_link(rate="100mbit", slow_node=1) as link:
        procs = [subprocess.Popen(link.nodes[k].command(["torchrun", "--nnodes", "2", "--node-rank", str(k),
                  "--nproc-per-node", "1", "--master-addr", link.master_addr, ...]), env=link.nodes[k].env())
                 for k in (0, 1)]

Only egress is shaped: what a node receives would need an ifb device (tc shapes egress only; ingress is policed
or redirected), and a ring of two is bound by its slower direction anyway. Run as a script to time the job:
python -m benchmarks.shaped_net --slow-link [--rate 100mbit] [--with-haiprof]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from contextlib import contextmanager
from dataclasses import dataclass

# tbf needs a bucket at least one packet deep; lo's MTU is 64 KiB, so a few of those.
DEFAULT_RATE = "1gbit"
DEFAULT_BURST = "256kb"
DEFAULT_LATENCY = "50ms"


def available() -> tuple[bool, str]:
    """(True, "") when a shaped namespace can be created here, else (False, why)."""
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return False, f"`{tool}` (iproute2) is not installed"
    if os.geteuid() != 0:
        return False, "creating a network namespace needs root (CAP_NET_ADMIN)"
    name = f"hp-probe-{uuid.uuid4().hex[:8]}"
    r = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if r.returncode != 0:
        return False, f"`ip netns add` failed: {r.stderr.strip() or r.returncode}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return True, ""


@dataclass
class ShapedNet:
    name: str
    rate: str

    def command(self, argv: list) -> list:
        """argv run inside the namespace (as the same user, same cwd and environment)."""
        return ["ip", "netns", "exec", self.name, *map(str, argv)]

    def env(self, base: dict | None = None) -> dict:
        """Environment for jobs inside: gloo must use `lo` (the host's other interfaces do not exist here)."""
        e = dict(os.environ if base is None else base)
        e.setdefault("GLOO_SOCKET_IFNAME", "lo")
        e.setdefault("MASTER_ADDR", "127.0.0.1")
        return e

    def run(self, argv: list, **kwargs) -> subprocess.CompletedProcess:
        kwargs.setdefault("env", self.env())
        return subprocess.run(self.command(argv), **kwargs)

    def qdisc(self) -> str:
        r = subprocess.run(["tc", "-n", self.name, "qdisc", "show", "dev", "lo"], capture_output=True, text=True)
        return r.stdout.strip()


def _ip(*args: str) -> None:
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {r.stderr.strip()}")


@contextmanager
def shaped_loopback(rate: str | None = DEFAULT_RATE, burst: str = DEFAULT_BURST, latency: str = DEFAULT_LATENCY,
                    name: str | None = None):
    """Create a namespace with `lo` up and shaped to `rate` (None: unshaped); delete it on exit."""
    ok, why = available()
    if not ok:
        raise RuntimeError(f"shaped network unavailable: {why}")
    name = name or f"haiprof-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    _ip("netns", "add", name)
    try:
        _ip("-n", name, "link", "set", "lo", "up")
        if rate:
            r = subprocess.run(["tc", "-n", name, "qdisc", "add", "dev", "lo", "root", "tbf", "rate", rate,
                                "burst", burst, "latency", latency], capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"tc qdisc add failed: {r.stderr.strip()}")
        yield ShapedNet(name, rate or "unshaped")
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


SUBNET = "10.77.0.{}"      # private addresses, seen only inside the testbed's own namespaces
MASTER_PORT = 29500         # fresh namespaces: nothing else listens there


def slow_link_available() -> tuple[bool, str]:
    """available(), and `unshare` (util-linux) for each node's own host name."""
    ok, why = available()
    if ok and shutil.which("unshare") is None:
        return False, "`unshare` (util-linux) is not installed"
    return ok, why


@dataclass
class Node:
    """One "node" of the slow-link testbed: its namespace, host name, veth interface and address."""
    netns: str
    host: str
    ifname: str
    addr: str

    def command(self, argv: list) -> list:
        """argv run in this node's namespace under its own host name (haiprof names nodes by host)."""
        return ["ip", "netns", "exec", self.netns, "unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"',
                self.host, *map(str, argv)]

    def env(self, base: dict | None = None) -> dict:
        e = dict(os.environ if base is None else base)
        e["GLOO_SOCKET_IFNAME"] = self.ifname   # the ranks talk over the veth, never this namespace's lo
        return e

    def qdisc(self) -> str:
        r = subprocess.run(["tc", "-s", "-n", self.netns, "qdisc", "show", "dev", self.ifname], capture_output=True,
                           text=True)
        return r.stdout.strip()


@dataclass
class SlowLink:
    nodes: list
    slow_node: int
    rate: str

    @property
    def master_addr(self) -> str:
        return self.nodes[0].addr


@contextmanager
def slow_link(rate: str | None = "100mbit", slow_node: int | tuple = 1, burst: str = "64kb",
              latency: str = DEFAULT_LATENCY):
    """Two namespaces joined by a veth pair, node `slow_node`'s egress shaped to `rate` (a tuple: each of those
    nodes', (0, 1) both ends alike; rate None: both unshaped); deleted on exit. The veth's MTU is 1500, so a 64 KB
    bucket is ~40 packets deep."""
    ok, why = slow_link_available()
    if not ok:
        raise RuntimeError(f"shaped network unavailable: {why}")
    tag = f"{os.getpid() % 100000}{uuid.uuid4().hex[:4]}"
    nodes = [Node(f"haiprof-{tag}-n{k}", f"hpnode{k}-{tag}", f"hpv{k}-{tag}"[:15], SUBNET.format(k + 1))
             for k in range(2)]
    made = []
    try:
        for nd in nodes:
            _ip("netns", "add", nd.netns)
            made.append(nd.netns)
            _ip("-n", nd.netns, "link", "set", "lo", "up")
        _ip("link", "add", nodes[0].ifname, "netns", nodes[0].netns, "type", "veth", "peer", "name", nodes[1].ifname,
            "netns", nodes[1].netns)
        for nd in nodes:
            _ip("-n", nd.netns, "addr", "add", f"{nd.addr}/24", "dev", nd.ifname)
            _ip("-n", nd.netns, "link", "set", nd.ifname, "up")
        for k in ((slow_node,) if isinstance(slow_node, int) else tuple(slow_node)) if rate else ():
            slow = nodes[k]
            r = subprocess.run(["tc", "-n", slow.netns, "qdisc", "add", "dev", slow.ifname, "root", "tbf", "rate", rate,
                                "burst", burst, "latency", latency], capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"tc qdisc add failed: {r.stderr.strip()}")
        yield SlowLink(nodes, slow_node, rate or "unshaped")
    finally:
        for name in made:   # deleting a namespace deletes its end of the veth, and so the pair
            subprocess.run(["ip", "netns", "del", name], capture_output=True)


def run_job(link: SlowLink, argv: list, haiprof_out: str | None = None, timeout: float = 300,
            haiprof_args: tuple = ()) -> list:
    """A 2-node job across the testbed: on each node `torchrun --nnodes 2 --node-rank K --nproc-per-node 1 ARGV`
    (under `haiprof run --out OUT/nodeK -- torchrun ...` when haiprof_out is given). [CompletedProcess-like
    (returncode, stdout, stderr)] per node; a node still running at `timeout` is killed."""
    procs = []
    for k, nd in enumerate(link.nodes):
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(k),
               "--nproc-per-node", "1", "--master-addr", link.master_addr, "--master-port", str(MASTER_PORT),
               *map(str, argv)]
        if haiprof_out:
            cmd = [sys.executable, "-m", "haiprof", "run", "--quiet", *haiprof_args, "--out",
                   os.path.join(haiprof_out, f"node{k}"), "--", *cmd]
        procs.append(subprocess.Popen(nd.command(cmd), env=nd.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    out = []
    for p in procs:
        try:
            so, se = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            so, se = p.communicate()
        out.append(subprocess.CompletedProcess(p.args, p.returncode, so, se))
    return out


EXAMPLES = {"ddp": "ddp_comm_bound.py", "fsdp": "fsdp_comm_bound.py"}
# What each example's third case adds on the shaped link: DDP's fp16 compression hook, FSDP's async prefetch.
REMEDY = {"ddp": ("fp16 hook", ["--compress"]), "fsdp": ("prefetch", ["--prefetch"])}


def _time_example(net: ShapedNet, steps: int, extra: list, haiprof: bool = False, example: str = "ddp") -> str:
    """ms/step as rank 0 of examples/<example>_comm_bound.py measures it; with `haiprof`, started by `haiprof run`
    (then the verdict and exposed communication share follow)."""
    example = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples",
                           EXAMPLES[example])
    # One node, no --master-port: torchrun picks a free port (c10d on localhost:0), so runs never collide.
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", example, "--steps", str(steps),
            *extra]
    with tempfile.TemporaryDirectory(prefix="hp-bench-") as out:
        if haiprof:
            argv = [sys.executable, "-m", "haiprof", "run", "--quiet", "--out", out, "--", *argv]
        r = net.run(argv, capture_output=True, text=True)
        verdict = _verdict(out) if haiprof else ""
    lines = [ln for ln in r.stdout.splitlines() if "ms/step" in ln]
    return lines[-1] + verdict if lines else f"failed (exit {r.returncode}): {r.stderr.strip()[-300:]}"


def _verdict(run: str) -> str:
    try:
        with open(os.path.join(run, "summary.json")) as f:
            s = json.load(f)
    except (OSError, ValueError):
        return ", no summary"
    d = s.get("distributed") or {}
    comm, over = d.get("comm") or {}, d.get("ddp") or {}
    out = f", verdict {s.get('bottleneck')}, exposed comm {100 * comm.get('exposed_share', 0):.0f}%"
    if over:
        out += f" ({over.get('framework', 'DDP')}: {over['comm_ms']:.0f} ms comm/step, " \
               f"{100 * (1 - over['exposed_fraction']):.0f}% overlapped)"
    return out


def _tcp_figures(rank_dir: str) -> str:
    """A rank's view of its node's TCP send queues (summary.json hardware.tcp, analyzers/slow_link.py)."""
    try:
        with open(os.path.join(rank_dir, "summary.json")) as f:
            t = (json.load(f).get("hardware") or {}).get("tcp") or {}
    except (OSError, ValueError):
        return "no summary"
    if not t.get("samples"):
        return "no TCP samples"
    rate = t.get("delivery_bytes_per_s")
    return (f"send queues backlogged in {100 * t['backlog_share']:.0f}% of {t['samples']} samples, mean "
            f"{t['queued_bytes_mean'] / 1e3:.0f} KB, {rate / 1e6 if rate else 0:.1f} MB/s while backlogged")


def _slow_link_cases(args) -> int:
    """ms/step of examples/ddp_comm_bound.py across two nodes, and with --with-haiprof what haiprof says."""
    example = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", EXAMPLES["ddp"])
    argv = [example, "--steps", str(args.steps), "--batch-size", str(args.batch_size), "--layers", "2"]
    for label, slow in (("unshaped", ()), (f"node 1 uplink {args.rate}", 1), (f"both uplinks {args.rate}", (0, 1))):
        with slow_link(args.rate if slow != () else None, slow or 1) as link, \
                tempfile.TemporaryDirectory(prefix="hp-bench-") as out:
            rs = run_job(link, argv, haiprof_out=out if args.with_haiprof else None,
                         haiprof_args=("--trace-steps", "0", "--sample-interval", "0.1"))
            lines = [ln for ln in rs[0].stdout.splitlines() if "ms/step" in ln]
            said = ""
            if args.with_haiprof:
                try:
                    with open(os.path.join(out, "node0", "summary.json")) as f:
                        s = json.load(f)
                    said = f"; haiprof: {s['headline']} First action: {(s.get('next_steps') or [{}])[0].get('title')}"
                    said += "".join(f"\n{'':<27}rank {k}: {_tcp_figures(os.path.join(out, 'node0', f'rank-{k}'))}"
                                    for k in (0, 1))
                except (OSError, ValueError):
                    said = "; haiprof: no summary"
            print(f"{label:<26} {lines[-1] if lines else [r.returncode for r in rs]}{said}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", default=DEFAULT_RATE)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--with-haiprof", action="store_true", help="also time each case under `haiprof run`")
    ap.add_argument("--example", choices=sorted(EXAMPLES), default="ddp",
                    help="ddp: DDP's gradient allreduce; fsdp: FSDP2's all-gathers and reduce-scatters")
    ap.add_argument("--slow-link", action="store_true",
                    help="two nodes joined by a veth pair: unshaped, node 1's uplink shaped, both shaped (DDP only)")
    args = ap.parse_args(argv)
    ok, why = slow_link_available() if args.slow_link else available()
    if not ok:
        print(f"shaped network unavailable: {why}")
        return 1
    if args.slow_link:
        return _slow_link_cases(args)
    extra = ["--batch-size", str(args.batch_size)]
    remedy, more_args = REMEDY[args.example]
    cases = [("unshaped loopback", None, []), (f"shaped {args.rate}", args.rate, []),
             (f"shaped {args.rate} + {remedy}", args.rate, more_args)]
    for label, rate, more in cases:
        with shaped_loopback(rate) as net:
            print(f"{label:<28} torchrun: {_time_example(net, args.steps, extra + more, example=args.example)}")
            if args.with_haiprof:
                print(f"{label:<28} haiprof:  "
                      f"{_time_example(net, args.steps, extra + more, haiprof=True, example=args.example)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
