"""This host's TCP send queues and interface counters (procfs), for telling a slow link from a slow collective.

A rank whose own link is slow does not arrive late at the gradient sync: the transfer itself takes long, for every
rank. What its node shows that the others' do not is data waiting to leave: bytes the job wrote to its sockets and
the peer has not acknowledged yet pile up behind the slow link. Per sample:

  sock_diag netlink (inet_diag, what `ss` reads), else /proc/net/tcp and tcp6: the send queue of ESTABLISHED
      sockets (bytes written and not yet acknowledged: idiag_wqueue, proc_net_tcp.rst's tx_queue), summed, and
      how many sockets held any. Netlink dumps only the sockets that exist; reading /proc/net/tcp walks the whole
      established hash table (5.6 ms a file for 262,144 buckets on this machine's kernel, with 2 sockets);
  /proc/net/dev                   tx/rx bytes of every interface but `lo` (ranks of one node talk over lo);
  /proc/net/snmp                  Tcp RetransSegs (segments retransmitted: drops on the path).

All three are the network namespace's: a container's view when the job runs in one. Samples hold raw counters;
rates are the analyzers' job. Only the first rank of each node of a distributed job samples them (WORLD_SIZE > 1,
LOCAL_RANK 0, set by torchrun): the comparison is between nodes, all ranks of a node would read the same counters,
and the dump's walk of the hash table costs milliseconds a sample whatever the job (docs/benchmarks.md).
"""
from __future__ import annotations

import os
import socket
import struct

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


NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY = 4, 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
IPPROTO_TCP, TCP_ESTABLISHED = 6, 1
NLMSG_HDR = struct.Struct("=LHHLL")
WQUEUE_AT = 4 + 48 + 8     # inet_diag_msg: family/state/timer/retrans, inet_diag_sockid, expires and rqueue


def _dump_request(family: int, seq: int) -> bytes:
    """An inet_diag_req_v2 dump of one family's ESTABLISHED TCP sockets (no extensions, any address)."""
    req = struct.pack("=BBBxI", family, IPPROTO_TCP, 0, 1 << TCP_ESTABLISHED) + bytes(48)
    return NLMSG_HDR.pack(NLMSG_HDR.size + len(req), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + req


def send_queues_netlink() -> tuple[int, int, int]:
    """send_queues() through sock_diag netlink; raises OSError where netlink is refused (no such socket family,
    a seccomp profile)."""
    queued = busy = n = 0
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as sk:
        sk.settimeout(1.0)
        for seq, family in enumerate((socket.AF_INET, socket.AF_INET6), 1):
            sk.send(_dump_request(family, seq))
            done = False
            while not done:
                data = sk.recv(65536)
                off = 0
                while off + NLMSG_HDR.size <= len(data):
                    length, kind, _, _, _ = NLMSG_HDR.unpack_from(data, off)
                    if length < NLMSG_HDR.size:
                        done = True
                        break
                    if kind == NLMSG_DONE:
                        done = True
                    elif kind == NLMSG_ERROR:
                        raise OSError("sock_diag dump refused")
                    elif kind == SOCK_DIAG_BY_FAMILY and length >= NLMSG_HDR.size + WQUEUE_AT + 4:
                        (wq,) = struct.unpack_from("=I", data, off + NLMSG_HDR.size + WQUEUE_AT)
                        n += 1
                        queued += wq
                        busy += wq > 0
                    off += (length + 3) & ~3
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
    enable_hint = "runs in each node's first rank of a distributed job (WORLD_SIZE > 1, LOCAL_RANK 0)"

    def __init__(self, proc: str = PROC):
        self.proc = proc
        self.netlink = proc == PROC   # this host's own sockets: the cheap dump, procfs when it is refused

    @staticmethod
    def available(proc: str = PROC) -> tuple[bool, str]:
        if not os.path.isfile(os.path.join(proc, "net", "tcp")):
            return False, f"no {proc}/net/tcp"
        try:
            world = int(os.environ.get("WORLD_SIZE") or 1)
        except ValueError:
            world = 1
        if world <= 1:
            return False, "not a rank of a distributed job: a node's send queues are compared with other nodes'"
        if os.environ.get("LOCAL_RANK", "0") != "0":
            return False, "its node's first rank (LOCAL_RANK 0) samples the node's send queues"
        return True, ""

    def sample(self) -> dict:
        if self.netlink:
            try:
                queued, busy, n = send_queues_netlink()
            except OSError:
                self.netlink = False
        if not self.netlink:
            queued, busy, n = send_queues(self.proc)
        rec = {"send_queued_bytes": queued, "sockets_queued": busy, "sockets": n}
        dev = interface_bytes(self.proc)
        if dev is not None:
            rec["tx_bytes"], rec["rx_bytes"] = dev
        retrans = retransmits(self.proc)
        if retrans is not None:
            rec["retrans_segs"] = retrans
        return rec
