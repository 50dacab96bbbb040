"""`haiprof run` starts the script in its own python (runtime/child_run.py, runtime/child_boot.py): real processes,
each compared with plain python where python has an answer."""
from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import subprocess
import sys
import termios
import time

from conftest import HAIPROF, REPO, load_summary, read_pty, run_haiprof

from haiprof.runtime.child_run import interpreter_options

TRAIN = """
import torch
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def step():
    opt.zero_grad()
    loss = model(torch.randn(16, 8)).pow(2).mean()
    loss.backward()
    opt.step()
    return loss.item()
for _ in range(6):
    step()
"""


def _both(tmp_path, body: str, *args, env=None):
    script = tmp_path / "script.py"
    script.write_text(TRAIN + body)
    e = {**os.environ, **(env or {})}
    plain = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=120,
                           cwd=tmp_path, env=e)
    ours = run_haiprof("run", "--quiet", "--trace-steps", "0", "--out", tmp_path / "r", script, *args,
                       cwd=tmp_path, env=env)
    return plain, ours


def test_the_script_sees_pythons_own_stack_and_command_line(tmp_path):
    plain, ours = _both(tmp_path, """
import sys, traceback, json
traceback.print_stack(file=sys.stdout)
print(json.dumps(open("/proc/self/cmdline", "rb").read().split(b"\\0")[1:-1], default=bytes.decode))
print(sys.getrecursionlimit(), len(traceback.extract_stack()))
""", "--lr", "0.1")
    assert ours.returncode == plain.returncode == 0, ours.stderr
    assert ours.stdout == plain.stdout
    assert '["' in ours.stdout and "script.py" in ours.stdout and "haiprof" not in ours.stdout


def test_environment_and_path_are_pythons_and_a_subprocess_is_not_profiled(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    # the user's own sitecustomize on PYTHONPATH still runs in the script's python, before the script
    (site / "sitecustomize.py").write_text("import os\nopen('site.log', 'a').write(f'{os.getpid()}\\n')\n")
    body = """
import os, sys, subprocess
print(os.environ.get("PYTHONPATH"), str(os.getpid()) in open("site.log").read().split())
print([p for p in sys.path if "runtime" in p or p.endswith("boot")])
print(sorted(k for k in os.environ if k.startswith("HAIPROF_BOOT")))
print(subprocess.run([sys.executable, "-c", "import sys; print('haiprof' in sys.modules)"],
                     capture_output=True, text=True).stdout.strip())
"""
    plain, ours = _both(tmp_path, body, env={"PYTHONPATH": str(site)})
    assert ours.returncode == plain.returncode == 0, ours.stderr
    assert ours.stdout == plain.stdout
    assert ours.stdout.splitlines() == [f"{site} True", "[]", "[]", "False"]


def test_a_script_killed_outright_still_gets_its_report(tmp_path):
    plain, ours = _both(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    assert ours.returncode == plain.returncode == -signal.SIGKILL
    meta = json.loads((tmp_path / "r" / "meta.json").read_text())
    assert meta["exit_code"] == 128 + signal.SIGKILL and meta["how"] == "sigkill"
    assert (tmp_path / "r" / "report.html").is_file() and load_summary(tmp_path / "r")["exit_code"] == 137


def test_exit_code_of_raise_systemexit_is_pythons(tmp_path):
    plain, ours = _both(tmp_path, "raise SystemExit(7)\n")
    assert ours.returncode == plain.returncode == 7
    assert load_summary(tmp_path / "r")["exit_code"] == 7


def test_the_training_does_not_outlive_a_killed_haiprof(tmp_path):
    script = tmp_path / "forever.py"
    script.write_text(TRAIN + "import os, time\nopen('pid', 'w').write(str(os.getpid()))\n"
                      "while True:\n    step(); time.sleep(0.01)\n")
    proc = subprocess.Popen([*HAIPROF, "run", "--quiet", "--out", str(tmp_path / "r"), str(script)], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (tmp_path / "pid").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int((tmp_path / "pid").read_text())
    assert pid != proc.pid
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    raise AssertionError("the script's python outlived haiprof")


def test_interpreter_options_are_passed_on_but_not_the_script_or_its_prompt():
    assert interpreter_options(["python", "-X", "dev", "-W", "error", "-u", "-m", "haiprof", "run", "x.py"]) == \
        ["-X", "dev", "-W", "error", "-u"]
    assert interpreter_options(["/venv/bin/python", "/venv/bin/haiprof", "run", "x.py"]) == []
    assert interpreter_options(["python", "-i", "-Bi", "-m", "haiprof"]) == ["-B"]
    assert interpreter_options(["python", "-Xdev", "--check-hash-based-pycs", "always", "x"]) == \
        ["-Xdev", "--check-hash-based-pycs", "always"]


def test_the_boot_folder_holds_only_the_hook():
    boot = REPO / "haiprof" / "runtime" / "boot"
    assert sorted(p.name for p in boot.iterdir() if p.name != "__pycache__") == ["sitecustomize.py"]


COUNTS = TRAIN + """
import os, signal, sys, time
seen = []
signal.signal(signal.SIGINT, lambda s, f: seen.append("int"))
signal.signal(signal.SIGTERM, lambda s, f: seen.append("term"))
print("ready", flush=True)
deadline = time.monotonic() + 60
while len(seen) < 2 and time.monotonic() < deadline:
    step(); time.sleep(0.01)
    if seen == ["int"] and not os.path.exists("term-sent"):
        open("int-seen", "w").close()
print("handled", seen, flush=True)
"""


def _controlling_tty(slave):
    def setup():
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    return setup


def test_a_signal_reaches_the_script_once_from_the_terminal_and_from_kill(tmp_path):
    """Ctrl-C on the terminal reaches both processes (the kernel sends it to the foreground group): haiprof does not
    send it again; a SIGTERM sent to haiprof's pid is passed on, once. The script's own handlers count them."""
    script = tmp_path / "counts.py"
    script.write_text(COUNTS)
    master, slave = pty.openpty()
    proc = subprocess.Popen([*HAIPROF, "run", "--quiet", "--trace-steps", "0", "--out", str(tmp_path / "r"),
                             str(script)], stdin=slave, stdout=slave, stderr=slave, cwd=tmp_path,
                            preexec_fn=_controlling_tty(slave))
    state = {"int": False, "term": False}

    def drive(got):
        if not state["int"] and b"ready" in got:
            os.write(master, b"\x03")   # the terminal's Ctrl-C: SIGINT to the foreground group, from the kernel
            state["int"] = True
        elif state["int"] and not state["term"] and (tmp_path / "int-seen").exists():
            (tmp_path / "term-sent").touch()
            proc.send_signal(signal.SIGTERM)   # kill PID: to haiprof alone
            state["term"] = True

    got = read_pty(master, proc, 120, drive)
    os.close(slave)
    os.close(master)
    assert proc.wait(timeout=30) == 0, got[-3000:]
    assert b"handled ['int', 'term']" in got, got[-3000:]
