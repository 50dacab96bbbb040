"""End-of-job gather: every rank's digest reaches rank 0's run directory through the job's own store.

torchrun's agent hosts a TCPStore for the job (MASTER_ADDR:MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE=True) that
lives until every node's workers are done; workers may connect to it as clients at any time. No daemon of ours.

  * rank 0, at start: publishes a random token that is also in its rank-0/meta.json;
  * rank k, at exit, after analysing its own directory on its own node (analysis/rank_digest.py): if it can read
    rank-0/meta.json with that token, the output directory is shared (same machine or a shared filesystem): its
    rank directory is already in place and it only says "fs". Otherwise it puts a gzip'd tar of its digest
    (DIGEST_FILES: meta.json, summary.json, steps.npz, status.jsonl; a few KB to a few hundred KB) in the store
    and says "store". Raw data (phases, samples, traces) never leaves the node; the merged report names the
    rank's host and its directory there;
  * rank 0, at exit: waits (bounded) for every rank's word, unpacks the digests into rank-<k>/ and deletes each
    key as soon as it is read; what it did for each rank goes to gather.json. A rank that never answers is
    listed as missing.

The store's agent holds at most IN_FLIGHT digests of at most MAX_DIGEST_BYTES each, whatever the world size
(IN_FLIGHT x MAX_DIGEST_BYTES = 64 MiB, plus a word of a few bytes per rank not yet read): a rank takes a slot
(an atomic counter, store.add) before its set and waits while IN_FLIGHT are taken; rank 0 frees the slot once
it has read and deleted the digest. A digest over the cap stays on its node (said in gather.json).

Keys live under haiprof/<run id>/<restart>/ so an elastic restart never reads an older attempt's data.
"""
from __future__ import annotations

import io
import json
import os
import signal
import tarfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

from ..rundir import DIGEST_FILES, GATHER_FILE

MAX_DIGEST_BYTES = 4 * 2**20          # a TCPStore value is held in memory on the agent: a digest is far smaller
IN_FLIGHT = 16                        # digests set and not yet read by rank 0, at most
SLOT_POLL_S = 0.05
FULL_SWEEP_S = 2.0
DEFAULT_TIMEOUT_S = 60.0              # rank 0 waits this long after its own end for the others
TERMINATING_TIMEOUT_S = 3.0           # ...but only this long when the job is being torn down (SIGTERM)
CONNECT_TIMEOUT_S = 10.0


def rank_dir_name(rank: int) -> str:
    return f"rank-{rank}"


def _bundle(rank_dir: Path) -> bytes:
    """The rank's digest files only: raw data stays on its node."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in DIGEST_FILES:
            p = rank_dir / name
            if p.is_file():
                tar.add(p, arcname=name)
    return buf.getvalue()


def _unbundle(data: bytes, dest: Path) -> int:
    dest.mkdir(parents=True, exist_ok=True)
    n = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for m in tar.getmembers():
            # Only plain files with relative paths inside dest: a tar from the network is not trusted blindly.
            target = (dest / m.name).resolve()
            if not m.isfile() or not str(target).startswith(str(dest.resolve()) + os.sep):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(m)
            if src is not None:
                target.write_bytes(src.read())
                n += 1
    return n


class RankGather:
    """One per worker process. Every failure is recorded as a reason, never raised into the training."""

    def __init__(self, run_dir: Path, rank: int, world_size: int, env=None, store=None):
        env = os.environ if env is None else env
        self.run_dir, self.rank, self.world_size = Path(run_dir), rank, world_size
        self.token = uuid.uuid4().hex
        self.prefix = f"haiprof/{env.get('TORCHELASTIC_RUN_ID', 'none')}/{env.get('TORCHELASTIC_RESTART_COUNT', '0')}/"
        self.addr, self.port = env.get("MASTER_ADDR"), env.get("MASTER_PORT")
        self.timeout_s = float(env.get("HAIPROF_GATHER_TIMEOUT", DEFAULT_TIMEOUT_S))
        self.reason = ""
        self._store = store   # a test hands in its own store; else the job's TCPStore, connected on first use

    def _connect(self):
        if self._store is not None or self.reason:
            return self._store
        if not self.addr or not self.port:
            self.reason = "no MASTER_ADDR/MASTER_PORT: not started by torchrun"
            return None
        try:
            from torch.distributed import TCPStore
            self._store = TCPStore(self.addr, int(self.port), is_master=False,
                                   timeout=timedelta(seconds=CONNECT_TIMEOUT_S))
        except Exception as e:
            self.reason = f"job store {self.addr}:{self.port} unreachable: {type(e).__name__}: {e}"
        return self._store

    def start(self) -> None:
        """Rank 0 publishes its token (called after its meta.json, which holds the same token, is written)."""
        if self.rank == 0 and self.world_size > 1:
            store = self._connect()
            if store is not None:
                try:
                    store.set(self.prefix + "token0", self.token)
                except Exception as e:
                    self.reason = f"store write failed: {type(e).__name__}: {e}"

    # -- rank k ---------------------------------------------------------------------------------------------
    def _rank0_visible(self, store) -> bool:
        try:
            if not store.check([self.prefix + "token0"]):
                return False
            token0 = store.get(self.prefix + "token0").decode()
            meta = json.loads((self.run_dir / rank_dir_name(0) / "meta.json").read_text())
            return meta.get("gather_token") == token0
        except (OSError, ValueError):
            return False

    def send(self, rank_dir: Path) -> str:
        store = self._connect()
        if store is None:
            return f"not sent: {self.reason}"
        try:
            if self._rank0_visible(store):
                how = "fs"
            else:
                data = _bundle(rank_dir)
                if len(data) > MAX_DIGEST_BYTES:
                    how = f"too large ({len(data) >> 10} KiB): kept on this node"
                elif not self._take_slot(store):
                    how = f"store busy ({IN_FLIGHT} digests in flight for {self.timeout_s:.0f} s): kept on this node"
                else:
                    store.set(self.prefix + f"data/{self.rank}", data)
                    how = "store"
            store.set(self.prefix + f"done/{self.rank}", how)
            store.add(self.prefix + "ndone", 1)   # rank 0 looks at the ranks only when this moves
            return how
        except Exception as e:
            return f"not sent: {type(e).__name__}: {e}"

    def _take_slot(self, store) -> bool:
        """One of IN_FLIGHT slots (an atomic counter on the store); rank 0 gives it back once it has read ours."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            if store.add(self.prefix + "inflight", 1) <= IN_FLIGHT:
                return True
            store.add(self.prefix + "inflight", -1)
            if time.monotonic() >= deadline:
                return False
            time.sleep(SLOT_POLL_S * (1 + self.rank % 7 / 7))   # spread the retries of many waiting ranks

    # -- rank 0 ---------------------------------------------------------------------------------------------
    def collect(self, terminating: bool = False) -> dict:
        """Wait (bounded) for every other rank; unpack what came through the store. Returns rank -> how."""
        result = {str(r): "missing" for r in range(1, self.world_size)}
        store = self._connect()
        if store is None:
            return self._write({"error": self.reason, "ranks": result})
        stop = {"now": False}

        def on_term(signum, frame):  # the launcher is tearing the job down: finish with what is here
            stop["now"] = True

        previous = signal.signal(signal.SIGTERM, on_term)
        try:
            deadline = time.monotonic() + (TERMINATING_TIMEOUT_S if terminating else self.timeout_s)
            pending, seen, swept = set(range(1, self.world_size)), -1, 0.0
            while pending:
                # one request a poll while nothing changes (the agent also serves the job's rendezvous); a full
                # look now and then all the same, for a rank that died between its word and the count
                ndone = store.add(self.prefix + "ndone", 0)
                if ndone != seen or time.monotonic() - swept > FULL_SWEEP_S:
                    seen, swept = ndone, time.monotonic()
                    for r in sorted(pending):
                        if self._take(store, r, result):
                            pending.discard(r)
                if not pending or time.monotonic() >= deadline:
                    break
                if stop["now"]:
                    deadline = min(deadline, time.monotonic() + 0.5)
                time.sleep(0.1)
            for r in pending:
                result[str(r)] = f"missing: no data from rank {r} within the gather timeout"
        finally:
            signal.signal(signal.SIGTERM, previous)
        return self._write({"ranks": result, "via": f"{self.addr}:{self.port}"})

    def _take(self, store, r: int, result: dict) -> bool:
        try:
            if not store.check([self.prefix + f"done/{r}"]):
                return False
            how = store.get(self.prefix + f"done/{r}").decode()
            if how == "store":
                data = store.get(self.prefix + f"data/{r}")
                store.delete_key(self.prefix + f"data/{r}")
                store.add(self.prefix + "inflight", -1)   # the slot is free for the next rank
                n = _unbundle(data, self.run_dir / rank_dir_name(r))
                how = f"store ({n} files, {len(data)} bytes)"
            store.delete_key(self.prefix + f"done/{r}")
            result[str(r)] = how
            return True
        except Exception as e:
            result[str(r)] = f"failed: {type(e).__name__}: {e}"
            return True

    def _write(self, record: dict) -> dict:
        record["rank0_token"] = self.token
        try:
            tmp = self.run_dir / f".{GATHER_FILE}.tmp"
            tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
            os.replace(tmp, self.run_dir / GATHER_FILE)
        except OSError:
            pass  # the run directory is gone: nothing left to record into
        return record
