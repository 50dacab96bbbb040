"""This host's TCP send queues and interface counters (procfs), for telling a slow link from a slow collective.

A rank whose own link is slow does not arrive late at the gradient sync: the transfer itself takes long, for every
rank. What its node shows that the others' do not is data waiting to leave: bytes the job wrote to its sockets and
the peer has not acknowledged yet pile up behind the slow link. Per sample:

  /proc/net/tcp, /proc/net/tcp6   tx_queue of ESTABLISHED sockets (bytes written and not yet acknowledged:
      proc_net_tcp.rst), summed, and how many sockets held any;
  /proc/net/dev                   tx/rx bytes of every interface but `lo` (ranks of one node talk over lo);
  /proc/net/snmp                  Tcp RetransSegs (segments retransmitted: drops on the path).

All three are the network namespace's: a container's view when the job runs in one. Samples hold raw counters;
rates are the analyzers' job.
"""
from __future__ import annotations

import os

PROC = "/proc"
ESTABLISHED = "01"
MAX_SOCKETS = 100_000   # a host with more sockets than this is read up to here (a sample stays milliseconds)


def send_queues(proc: str = PROC) -> tuple[int, int, int]:
    """(bytes queued to send, sockets with bytes queued, established sockets) over tcp and tcp6."""
    queued = busy = n = 0
    for name in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc, "net", name)) as f:
                next(f, None)
                for i, line in enumerate(f):
                    if i >= MAX_SOCKETS:
                        break
                    p = line.split(None, 5)
                    if len(p) < 5 or p[3] != ESTABLISHED:
                        continue
                    tx = int(p[4].split(":", 1)[0], 16)
                    n += 1
                    queued += tx
                    busy += tx > 0
        except (OSError, ValueError):
            continue
    return queued, busy, n


def interface_bytes(proc: str = PROC) -> tuple[int, int] | None:
    """(tx bytes, rx bytes) summed over every interface but lo, or None when unreadable."""
    try:
        with open(os.path.join(proc, "net", "dev")) as f:
            lines = f.read().splitlines()[2:]
    except OSError:
        return None
    tx = rx = 0
    for line in lines:
        name, _, rest = line.partition(":")
        v = rest.split()
        if name.strip() == "lo" or len(v) < 9:
            continue
        rx += int(v[0])
        tx += int(v[8])
    return tx, rx


def retransmits(proc: str = PROC) -> int | None:
    try:
        with open(os.path.join(proc, "net", "snmp")) as f:
            tcp = [ln.split() for ln in f if ln.startswith("Tcp:")]
        return int(dict(zip(tcp[0][1:], tcp[1][1:]))["RetransSegs"])
    except (OSError, IndexError, KeyError, ValueError):
        return None


class TcpQueueSampler:
    name = "tcp"
    enable_hint = "needs /proc/net/tcp (procfs with the network namespace's TCP table)"

    def __init__(self, proc: str = PROC):
        self.proc = proc

    @staticmethod
    def available(proc: str = PROC) -> tuple[bool, str]:
        if not os.path.isfile(os.path.join(proc, "net", "tcp")):
            return False, f"no {proc}/net/tcp"
        return True, ""

    def sample(self) -> dict:
        queued, busy, n = send_queues(self.proc)
        rec = {"send_queued_bytes": queued, "sockets_queued": busy, "sockets": n}
        dev = interface_bytes(self.proc)
        if dev is not None:
            rec["tx_bytes"], rec["rx_bytes"] = dev
        retrans = retransmits(self.proc)
        if retrans is not None:
            rec["retrans_segs"] = retrans
        return rec
