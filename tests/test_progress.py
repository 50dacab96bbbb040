"""The live status line: on stderr when it is a terminal (a real pseudo-terminal here), never on a pipe or stdout."""
import json
import re
import time

import pytest

from conftest import SCRIPTS, in_parallel, load_summary, run_haiprof, run_on_pty
from haiprof.runtime.progress import PhaseTail, status_line

STATUS = b"steps/s"


def _run_with_pty_stderr(args, timeout=120, stdout_pty=False):
    """Run haiprof with stderr (or stdout) on a pseudo-terminal; return (rc, bytes on the pty, bytes on the pipe)."""
    return run_on_pty(args, timeout, on_pty=("stdout",) if stdout_pty else ("stderr",))


def _frames(tty: bytes) -> list[bytes]:
    """The status texts drawn on the bottom row (save cursor, go to the row, erase it, text, restore cursor)."""
    return re.findall(rb"\x1b7\x1b\[\d+;1H\x1b\[2K([^\x1b]*)\x1b8", tty)


def test_status_line_on_a_terminal(tmp_path):
    out = tmp_path / "r"
    rc, tty, stdout = _run_with_pty_stderr(["run", "--out", out, SCRIPTS / "exits.py", "loop", "60"])
    assert rc == 0
    assert STATUS in tty and b"\x1b[1;23r" in tty, tty[-2000:]   # the bottom row of 24 kept out of scrolling
    # Redrawn in place, with the step count going up.
    frames = [f for f in _frames(tty) if f.startswith(b"haiprof: ") and STATUS in f]
    counts = [int(f.split()[1]) for f in frames]
    assert len(counts) >= 2 and counts == sorted(counts) and counts[-1] > counts[0], frames
    assert counts[-1] <= load_summary(out)["steps"] == 60
    assert b"of step time" in frames[-1]
    # Erased and given back before the verdict.
    assert b"\x1b[24;1H\x1b[2K\x1b[r\x1b8" in tty and b"report: " in tty.split(b"\x1b[r\x1b8")[-1]
    # Nothing of ours on stdout: the script's own output, byte for byte.
    assert stdout.decode().splitlines() == ["ready", "done"]


@pytest.fixture(scope="module")
def silent_runs(tmp_path_factory):
    """The three runs that must draw no status line, side by side (they are independent, and most of each is
    torch's import): on a pipe, with only stdout on a terminal, and --quiet on a terminal."""
    d = tmp_path_factory.mktemp("silent")
    loop = [SCRIPTS / "exits.py", "loop", "30"]
    pipe, stdout_tty, quiet = in_parallel(
        lambda: run_haiprof("run", "--out", d / "pipe", *loop, env={"HAIPROF_PROGRESS": "1", "TERM": "xterm"}),
        lambda: _run_with_pty_stderr(["run", "--out", d / "stdout-tty", *loop], stdout_pty=True),
        lambda: _run_with_pty_stderr(["run", "--quiet", "--out", d / "q", *loop]))
    return {"pipe": pipe, "stdout-tty": stdout_tty, "quiet": quiet}


def test_no_status_line_on_a_pipe(silent_runs):
    r = silent_runs["pipe"]
    assert r.returncode == 0
    assert "steps/s" not in r.stderr and "\x1b" not in r.stderr and "\r" not in r.stderr
    assert "steps/s" not in r.stdout and r.stdout.splitlines() == ["ready", "done"]
    assert "report: " in r.stderr


def test_stdout_terminal_alone_gets_no_status(silent_runs):
    # stdout on a terminal but stderr piped: the status never goes to stdout.
    rc, tty, stderr = silent_runs["stdout-tty"]
    assert rc == 0
    assert STATUS not in tty and b"\x1b" not in tty
    assert STATUS not in stderr


def test_quiet_and_opt_out_silence_it(silent_runs):
    rc, tty, _ = silent_runs["quiet"]
    assert rc == 0 and tty == b""


def test_phase_tail_reads_phases_bin_chunk_by_chunk(tmp_path):
    # What a run writes now (phases.bin, a chunk per flush): the same counts and attribution; a chunk that is
    # only partly written waits for the next poll.
    from haiprof.phasestore import encode_chunk
    path = tmp_path / "phases.bin"
    recs, t = [], 0
    for i in range(5):
        recs += [("dataloader", t, t + 10), ("forward", t + 10, t + 30), ("backward", t + 30, t + 90),
                 ("@backward", t + 90, t + 90), ("optimizer", t + 90, t + 100), ("@step", t + 100, t + 100)]
        t += 100
    first, second = encode_chunk(recs[:12]), encode_chunk(recs[12:])
    path.write_bytes(first + second[:9])
    tail = PhaseTail(path)
    tail.poll()
    assert tail.steps == 2
    path.write_bytes(first + second)
    tail.poll()
    assert tail.steps == 5 and tail.dominant() == ("backward", 0.6)
    assert tail.totals["dataloader"] == 40 and tail.totals["other"] == 0


def test_phase_tail_counts_and_attributes(tmp_path):
    # The reader behind the line: incremental, torn last line tolerated, first (warm-up) step excluded.
    path = tmp_path / "phases.jsonl"
    recs = []
    t = 0
    for i in range(5):
        recs += [["dataloader", t, t + 10], ["forward", t + 10, t + 30], ["backward", t + 30, t + 90],
                 ["@backward", t + 90, t + 90], ["optimizer", t + 90, t + 100], ["@step", t + 100, t + 100]]
        t += 100
    lines = [json.dumps(r) for r in recs]
    path.write_text("\n".join(lines[:14]) + "\n" + lines[14][:5])
    tail = PhaseTail(path)
    tail.poll()
    assert tail.steps == 2
    with open(path, "a") as f:
        f.write(lines[14][5:] + "\n" + "\n".join(lines[15:]) + "\n")
    tail.poll()
    assert tail.steps == 5
    assert tail.dominant() == ("backward", 0.6)
    assert tail.totals["dataloader"] == 40 and tail.totals["other"] == 0
    assert tail.steps_per_s() == 4 / (400 / 1e9)
    assert status_line(tail, 1.0).startswith("haiprof: 5 steps · ")


def test_yields_to_the_scripts_own_tqdm_bar(tmp_path):
    pytest.importorskip("tqdm", reason="tqdm comes with the test extra (transformers)")
    rc, tty, stdout = _run_with_pty_stderr(["run", "--out", tmp_path / "r", SCRIPTS / "tqdm_loop.py", "40"])
    assert rc == 0 and stdout.decode().splitlines() == ["done"]
    assert b"train: " in tty and b"40/40" in tty  # the script's bar is drawn
    assert STATUS not in tty                        # ours stays out of its way
    status = [json.loads(x) for x in (tmp_path / "r" / "status.jsonl").read_text().splitlines()]
    assert {"collector": "status-line", "available": True, "reason": "stepped aside for the script's tqdm bar"} \
        in status, status


def test_traceback_starts_on_a_clean_line(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import time, torch\n"
                      "m = torch.nn.Linear(4, 1); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
                      "for _ in range(30):\n"
                      "    m(torch.randn(2, 4)).sum().backward(); opt.step(); time.sleep(0.05)\n"
                      "raise ValueError('from the script')\n")
    rc, tty, _ = _run_with_pty_stderr(["run", "--out", tmp_path / "r", script])
    assert rc == 1
    assert STATUS in tty
    # The row is given back before the traceback, which then starts on the script's own line.
    assert b"\x1b[r\x1b8Traceback (most recent call last):" in tty, tty[-1500:]
    assert b"ValueError: from the script" in tty


def _synthetic_steps(n, t=0):
    """Records of n closure-style steps: optimizer wraps zero_grad, forward and backward, as Lightning does."""
    recs = []
    for _ in range(n):
        recs += [["dataloader", t, t + 7], ["forward", t + 9, t + 30], ["optimizer", t + 8, t + 95],
                 ["backward", t + 31, t + 80], ["@backward", t + 80, t + 80], ["@step", t + 95, t + 95]]
        t += 100
    return recs, t


def test_phase_tail_matches_the_report_arithmetic(tmp_path):
    from haiprof.analyzers.steps import build_steps, phase_share

    path = tmp_path / "phases.jsonl"
    all_recs, t = [], 0
    tail = PhaseTail(path)
    for chunk in (3, 1, 40, 17):  # polls that see a few steps each, as the live thread does
        recs, t = _synthetic_steps(chunk, t)
        all_recs += recs
        with open(path, "a") as f:
            f.write("".join(json.dumps(r) + "\n" for r in recs))
        tail.poll()
    steps, _ = build_steps([tuple(r) for r in all_recs])
    assert tail.steps == len(steps) == 61
    share = phase_share(steps[1:])  # the first (warm-up) step is excluded in both
    total = sum(tail.totals.values())
    for phase, ns in tail.totals.items():
        assert ns / total == pytest.approx(share[phase], abs=1e-9), phase


def test_phase_tail_stays_cheap_when_steps_are_fast(tmp_path):
    # 20 000 steps arriving in one poll: only a window is parsed, marks are counted without parsing.
    path = tmp_path / "phases.jsonl"
    recs, _ = _synthetic_steps(20000)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    tail = PhaseTail(path)
    t0 = time.perf_counter()
    tail.poll()
    assert time.perf_counter() - t0 < 1.0
    assert tail.steps == 20000 and tail.dominant()[0] == "backward"
