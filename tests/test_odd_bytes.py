"""Bytes that are not UTF-8 in an argument and in the script's name (Linux allows any bytes): the script sees the
argv python gives it, and the run still gets its summary and report, also through `haiprof report`."""
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import in_parallel

SCRIPT = (b"import sys, torch\nprint(repr(sys.argv))\nm = torch.nn.Linear(2, 1)\n"
          b"o = torch.optim.SGD(m.parameters(), lr=0.1)\nfor _ in range(6):\n"
          b"    o.zero_grad(); m(torch.randn(2, 2)).sum().backward(); o.step()\n")


def test_non_utf8_argument_and_script_name(tmp_path):
    script = os.fsencode(tmp_path) + b"/tr\xffain.py"
    with open(script, "wb") as f:
        f.write(SCRIPT)
    out = os.fsencode(tmp_path) + b"/r"
    haiprof = os.fsencode(Path(sys.executable).parent / "haiprof")
    plain, r = in_parallel(
        lambda: subprocess.run([os.fsencode(sys.executable), script, b"a\xfeb"], capture_output=True, timeout=120),
        lambda: subprocess.run([haiprof, b"run", b"--out", out, script, b"a\xfeb"], capture_output=True, timeout=180))
    assert (r.returncode, r.stdout) == (plain.returncode, plain.stdout) == (0, plain.stdout), r.stderr
    run = tmp_path / "r"
    assert sorted(p.name for p in run.iterdir() if p.name.startswith(".")) == []   # no .tmp left behind
    assert (run / "report.html").is_file() and json.loads((run / "summary.json").read_text())["steps"] == 6
    assert b"could not write" not in r.stderr
    (run / "report.html").unlink()
    again = subprocess.run([haiprof, b"report", b"--quiet", out], capture_output=True, timeout=120)
    assert again.returncode == 0 and again.stderr == b"" and (run / "report.html").is_file()
