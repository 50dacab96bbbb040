"""The side sampler runs at the lowest CPU priority (nice 19), so its samples do not preempt a training thread, and
the snapshot report it starts does too; neither is in the idle class, where a CPU run that keeps every core busy
would starve them. Read from the real processes' /proc/<pid>/stat (field 19 nice, field 41 policy)."""
import json
import os
import subprocess
import sys
import textwrap

SCHED_OTHER = 0


def stat_fields(text: str) -> tuple[int, int]:
    """(nice, policy) from a /proc/<pid>/stat line; comm may hold spaces and ')', the fields after the last ')' not."""
    rest = text.rsplit(")", 1)[1].split()
    return int(rest[16]), int(rest[38])


# Finds the sampler among the training process's children and writes its stat line once it runs at nice 19.
PROBE = textwrap.dedent("""
    import json, os, sys, time
    def sampler_pid():
        for tid in os.listdir("/proc/self/task"):
            for pid in open(f"/proc/self/task/{tid}/children").read().split():
                if b"haiprof.runtime.sidecar" in open(f"/proc/{pid}/cmdline", "rb").read():
                    return pid
    seen = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pid = sampler_pid()
        if pid:
            seen = open(f"/proc/{pid}/stat").read()
            if seen.rsplit(")", 1)[1].split()[16] == "19":
                break
        time.sleep(0.05)
    json.dump(seen, open(sys.argv[1], "w"))
""")


def test_the_sampler_runs_at_nice_19(tmp_path):
    script, seen = tmp_path / "probe.py", tmp_path / "seen.json"
    script.write_text(PROBE)
    r = subprocess.run([sys.executable, "-m", "haiprof", "run", "--quiet", "--out", str(tmp_path / "r"), str(script),
                        str(seen)], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    stat = json.loads(seen.read_text())
    assert stat is not None, "the training process had no sampler child"
    assert stat_fields(stat) == (19, SCHED_OTHER)
    assert (tmp_path / "r" / "samples" / "system.jsonl").read_text().strip(), "no samples at nice 19"


def test_the_snapshot_child_runs_at_nice_19():
    code = ("import subprocess; from haiprof.runtime.sidecar import _low_priority_child; "
            "print(subprocess.run(['cat', '/proc/self/stat'], preexec_fn=_low_priority_child, capture_output=True, "
            "text=True).stdout)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr
    assert stat_fields(r.stdout) == (19, SCHED_OTHER)
