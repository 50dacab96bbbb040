"""A script that replaces its own process (os.execv, as elastic restarts and launch wrappers do): python's output
and exit status, and the steps recorded before the exec kept (they were all lost: "no training steps")."""
import json
import os

import pytest

from conftest import load_summary, run_haiprof
from haiprof.runtime import exec_watch

RESTART = """\
import os, sys, torch
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
resumed = "--resumed" in sys.argv
for i in range(2 if resumed else 4):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
print("resumed" if resumed else "first", "trained", flush=True)
if not resumed:
    os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), "--resumed"])
sys.exit(3)
"""


def test_the_steps_before_the_script_replaces_itself_are_kept(tmp_path):
    script, out = tmp_path / "restart.py", tmp_path / "r"
    script.write_text(RESTART)
    r = run_haiprof("run", "--quiet", "--trace-steps", "0", "--out", out, script)
    assert (r.returncode, r.stdout) == (3, "first trained\nresumed trained\n"), r.stderr   # the new program's exit
    s = load_summary(out)
    assert s["steps"] == 4 and s["exit_code"] == 3, s["headline"]
    status = [json.loads(line) for line in (out / "status.jsonl").read_text().splitlines()]
    exec_said = [st["reason"] for st in status if st["collector"] == "exec"]
    assert exec_said and "replaced its process" in exec_said[-1] and "after 4 step(s)" in exec_said[-1], exec_said
    assert (out / "report.html").is_file()


class _Child:   # what exec_watch needs of child_boot._Child
    def __init__(self, tmp_path):
        self.pid, self.exec_seen, self.said = os.getpid(), False, []
        self.run_dir = self

    def before_exec(self):
        return 7

    def record_status(self, name, available, reason):
        self.said.append((name, reason))


def test_an_exec_that_fails_is_raised_to_the_script_and_said(tmp_path):
    def failing(path, args):
        raise FileNotFoundError(2, "No such file or directory")
    child = _Child(tmp_path)
    exec_ = exec_watch._wrapped(child, failing)
    with pytest.raises(FileNotFoundError):
        exec_("/nonexistent/python", ["python"])
    assert [n for n, _ in child.said] == ["exec", "exec"]
    assert "failed (FileNotFoundError" in child.said[-1][1] and "went on unprofiled" in child.said[-1][1]
    with pytest.raises(FileNotFoundError):   # a second attempt: the script's own, nothing more of ours
        exec_("/nonexistent/python", ["python"])
    assert len(child.said) == 2
