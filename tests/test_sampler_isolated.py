"""The side sampler never imports the user's files: started from a directory holding json.py, random.py and
select.py that would break it (or print), it still samples, and the script's output is python's."""
import subprocess
import sys
from pathlib import Path

from conftest import SCRIPTS, in_parallel, load_summary

SHADOWS = {"json.py": "raise ImportError('the user json.py was imported')\n",
           "random.py": "print('user random.py ran')\nraise SystemExit(7)\n",
           "select.py": "print('user select.py ran')\n"}


def test_sampler_ignores_the_users_modules_in_the_working_directory(tmp_path):
    for name, body in SHADOWS.items():
        (tmp_path / name).write_text(body)
    script = SCRIPTS / "seeded_train.py"
    out = tmp_path / "r"
    # the installed command, as a user types it (`python -m haiprof` would itself put the directory first)
    haiprof = Path(sys.executable).parent / "haiprof"
    plain, r = in_parallel(
        lambda: subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path,
                               timeout=120),
        lambda: subprocess.run([str(haiprof), "run", "--quiet", "--sample-interval", "0.05", "--out", str(out),
                                str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=180))
    assert (r.returncode, r.stdout) == (plain.returncode, plain.stdout), r.stderr
    samples = (out / "samples" / "system.jsonl").read_text().splitlines()
    assert len(samples) >= 3, "the sampler took no samples"
    status = (out / "status.jsonl").read_text()
    assert '"collector": "system", "available": true' in status
    assert load_summary(out)["steps"] == 16
