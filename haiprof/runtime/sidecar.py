"""The sampler side process: runs the system collectors off the training process (no GIL contention), at the lowest CPU
priority after its first sample (low_priority: it does not preempt a training thread).

Started by the session as `python -m haiprof.runtime.sidecar RUN_DIR PID INTERVAL [SNAPSHOT_S [stop-byte]]`
(`Sidecar.start`). It samples every collector on a jittered interval (so sampling does not alias with a periodic
training step), appends each sample to samples/<name>.jsonl with a flush, and exits when its stdin closes, on
SIGTERM, or when the training process is gone. With SNAPSHOT_S it also keeps a snapshot report of the run so far
(Snapshots). With `stop-byte` only a byte on stdin means stop: an end of file while the training process lives
means the script closed our pipe's end (os.closerange), and sampling goes on.
A collector that raises is recorded in status.jsonl with the reason and dropped; the others go on.
"""
from __future__ import annotations

import json
import os
import random
import select
import signal
import sys
import time

from ..errors import fd_identity, fd_kept_high
from ..rundir import RunDir


def _collectors(root_pid: int):
    """(name, factory) for every collector the side process hosts; the availability check comes first."""
    from haiprof.collectors.system import SystemSampler
    out = [(SystemSampler.name, SystemSampler.available, lambda: SystemSampler(root_pid))]
    # -- hardware collectors (GPU, InfiniBand/NIC, NUMA, memory bandwidth, RAPL, disks): runtime/hwcollectors.py
    from .hwcollectors import hardware_collectors
    return out + hardware_collectors(root_pid)


class Snapshots:
    """A report of the run so far, written every `every_s` by a child `haiprof report` at the lowest CPU priority,
    so a run killed days in keeps a report that old at most (the final report replaces it at the end). The
    interval grows to SPACING x the last report's own time (the first waits for the run's first phase record), so a very long run's snapshots cost a bounded share
    of one core (1/SPACING) whatever its length. The child dies with this process (PR_SET_PDEATHSIG): a snapshot
    never lands after the final report."""

    SPACING = 20

    def __init__(self, run_dir, every_s: float, command: list | None = None):
        self.run_dir, self.every_s = run_dir, every_s
        self.command = command or [sys.executable, "-m", "haiprof", "report", "--quiet", str(run_dir.path)]
        self.next_at = time.monotonic() + every_s
        self.child = None
        self.started = 0.0
        try:
            import ctypes  # noqa: F401  (for _low_priority_child, in the forked child)
        except ImportError:
            pass

    def poll(self) -> None:
        now = time.monotonic()
        if self.child is not None:
            if self.child.poll() is None:
                return
            took, self.child = now - self.started, None
            self.next_at = now + max(self.every_s, self.SPACING * took)
        # Not before the first phase record is on disk: a report of imports and set-up says nothing, and its
        # spacing would hold the first real snapshot back by SPACING x its time.
        if now >= self.next_at and self.run_dir.has_phase_data():
            import subprocess
            try:
                self.child = subprocess.Popen(
                    self.command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    close_fds=True, preexec_fn=_low_priority_child)
                self.started = now
            except OSError:
                self.next_at = now + self.every_s   # try again later; sampling goes on

    def stop(self) -> None:
        if self.child is not None and self.child.poll() is None:
            self.child.kill()
            self.child.wait()
            for tmp in self.run_dir.path.glob(f".*.{self.child.pid}.tmp"):   # what the killed child left half-made
                tmp.unlink(missing_ok=True)
        self.child = None


def _low_priority_child() -> None:
    """In the snapshot child before exec: killed if its parent (this sidecar) dies, then the lowest CPU priority
    (inherited from the sampler, said again for any other caller). ctypes is imported by the parent
    (Snapshots.__init__): imported here, after the fork at nice 19 beside busy cores, it took a second or more,
    and the next snapshot's spacing (SPACING x the child's time) with it."""
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    low_priority()


def low_priority() -> None:
    """Nice 19: the sampler takes CPU time the training threads leave, and does not preempt them. At nice 0 the
    training process burned +0.7-1.1 ms more CPU a step beside it (an intra-op thread spinning while the other was
    preempted); step-time ratios 1.03 vs 1.00, within this VM's noise (benchmarks/component_cost.py,
    docs/benchmarks.md). Not SCHED_IDLE: beside a CPU run that keeps every core busy it took 1 sample in a run."""
    try:
        os.nice(19 - os.nice(0))
    except OSError:
        pass   # the sampler still samples, at the priority it has


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return os.getppid() == pid


STOP_BYTE = "stop-byte"
STOP_WAIT_S = 3.0   # for the sampler to finish its last sample and exit before it is killed


class Sidecar:
    """The training process's handle on the side process. Its end of the stdin pipe is a bare descriptor at a high
    number, checked before use (errors.fd_identity): the script may close it and reuse the number for a file of
    its own, which must then be neither written nor closed; the side process is stopped by SIGTERM instead."""

    def __init__(self, proc, fd: int):
        self.proc, self.fd = proc, fd
        self._id = fd_identity(fd)
        self.pipe_lost = False   # the script closed our end of the pipe (said in the run's status)

    @classmethod
    def start(cls, run_dir, pid: int, interval_s: float, snapshot_s: float = 0.0) -> "Sidecar":
        # Started in the run directory, which holds no Python files: `-m` puts the working directory first on
        # sys.path, and the user's own json.py or random.py there must not replace the standard library's.
        import subprocess
        r, w = os.pipe()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "haiprof.runtime.sidecar", str(run_dir.path), str(pid), str(interval_s),
                 str(snapshot_s), STOP_BYTE],
                stdin=r, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
                cwd=str(run_dir.path))
        except BaseException:
            os.close(w)
            raise
        finally:
            os.close(r)
        return cls(proc, fd_kept_high(w))

    def _priority_back(self) -> None:
        """The sampler's last sample and exit at the training process's priority: at nice 19 beside processes
        that keep every core busy it got ~1% of a core and was killed before it finished (the suite beside
        a busy process: SIGKILL after 1 s). Raising a priority needs CAP_SYS_NICE; without it, STOP_WAIT_S."""
        try:
            os.setpriority(os.PRIO_PROCESS, self.proc.pid, os.getpriority(os.PRIO_PROCESS, 0))
        except (OSError, AttributeError):
            pass

    def check(self) -> bool:
        """Whether our end of the pipe is still ours; once lost it is abandoned (the number is the script's)."""
        if not self.pipe_lost and self.fd >= 0 and fd_identity(self.fd) != self._id:
            self.pipe_lost = True
        return not self.pipe_lost

    def stop(self) -> None:
        import subprocess
        self._priority_back()
        if self.check() and self.fd >= 0:
            try:
                os.write(self.fd, b"q")   # the stop byte: an end of file alone may be the script's doing
            except OSError:   # the sampler has ended already, or the script closed our end just now
                pass
            if self.check():
                os.close(self.fd)
        if self.pipe_lost:
            try:
                self.proc.terminate()
            except OSError:
                pass
        self.fd = -1
        try:
            self.proc.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            try:
                self.proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass


def main(argv: list[str]) -> int:
    run_dir, pid, interval = RunDir(argv[0]), int(argv[1]), float(argv[2])
    snapshot_s = float(argv[3]) if len(argv) > 3 else 0.0
    stop_byte = len(argv) > 4 and argv[4] == STOP_BYTE
    snapshots = Snapshots(run_dir, snapshot_s) if snapshot_s > 0 else None
    # Ctrl-C reaches the whole process group: the training process decides when we stop, via stdin.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # SIGTERM (the session's stop when the script closed our pipe): end the loop, not the process, so the
    # snapshot child is stopped and its half-made files removed. The wakeup descriptor ends the wait at once.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    active = []
    for name, available, factory in _collectors(pid):
        ok, reason = available()
        if ok:
            try:
                active.append((name, factory(), open(run_dir.samples_file(name), "a", encoding="utf-8")))
            except Exception as e:  # a collector that cannot start is a reason, not a crash
                ok, reason = False, f"{type(e).__name__}: {e}"
        run_dir.record_status(name, ok, reason)
    rng = random.Random(pid)
    try:
        _loop(active, pid, interval, rng, snapshots, run_dir, wake_r, stop_byte)
    finally:
        if snapshots is not None:
            snapshots.stop()
    for _, _, f in active:
        f.close()
    return 0


def _loop(active: list, pid: int, interval: float, rng, snapshots, run_dir, wake_fd: int = -1,
          stop_byte: bool = False) -> None:
    watch = [0] + ([wake_fd] if wake_fd >= 0 else [])
    first = True
    while (active or snapshots is not None) and _alive(pid):
        if snapshots is not None:
            snapshots.poll()
        for entry in list(active):
            name, collector, f = entry
            t0 = time.monotonic_ns()
            try:
                rec = collector.sample()
            except Exception as e:
                run_dir.record_status(name, False, f"stopped: {type(e).__name__}: {e}")
                active.remove(entry)
                f.close()
                continue
            rec["t_ns"] = t0
            rec["cost_ns"] = time.monotonic_ns() - t0
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")
            f.flush()
        if first:   # start-up and the first sample at normal priority: a short run on a busy machine has one
            first = False
            low_priority()
        wait = interval * rng.uniform(0.8, 1.2)
        readable, _, _ = select.select(watch, [], [], wait)
        if wake_fd in readable:
            break  # SIGTERM
        if 0 in readable:
            if os.read(0, 1) or not stop_byte:
                break  # the stop byte, or (without stop-byte) stdin closed: the session is finishing
            watch.remove(0)   # the script closed our pipe: go on until SIGTERM or the training process ends


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
