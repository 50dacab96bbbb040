"""The status line never corrupts a line the user sees: it lives on the terminal's bottom row, out of the scroll
region, whatever writes to the terminal (print, os.write, a child process, a line left open) and while the
script waits at an input() prompt. The terminal is a real pseudo-terminal; what it shows is rebuilt with pyte, a
VT100 emulator, from the exact bytes haiprof and the script wrote."""
import fcntl
import os
import pty
import struct
import subprocess
import termios
import time

import pytest

from conftest import HAIPROF, SCRIPTS, read_pty
from haiprof.rundir import RunDir

pyte = pytest.importorskip("pyte", reason="pyte comes with the test extra")

ROWS, COLS = 24, 100
PROMPT = b"your name? "


def _run_interactive(args, tmp_path, wait_at_prompt_s=1.6, timeout=120):
    """Everything on one pseudo-terminal (stdin too); answer the prompt after a few redraws.
    Returns (returncode, every byte the terminal got, the bytes up to the moment we answered)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    env = dict(os.environ, HAIPROF_PROGRESS="1", TERM="xterm")
    proc = subprocess.Popen([*HAIPROF, *map(str, args)], stdin=slave, stdout=slave, stderr=slave, env=env,
                            cwd=tmp_path, start_new_session=True)
    os.close(slave)
    state = {"at_prompt": None, "seen": None}

    def answer(got):
        if state["seen"] is None and PROMPT in got:
            state["seen"] = time.monotonic()
        if state["at_prompt"] is None and state["seen"] and time.monotonic() - state["seen"] > wait_at_prompt_s:
            state["at_prompt"] = got
            os.write(master, b"bob\n")

    got = read_pty(master, proc, timeout, answer)
    at_prompt = state["at_prompt"]
    os.close(master)
    proc.wait(timeout=30)
    return proc.returncode, got, at_prompt


def _screen(data: bytes):
    screen = pyte.HistoryScreen(COLS, ROWS, history=5000)
    stream = pyte.ByteStream(screen)
    stream.feed(data)
    return screen


def _lines(screen) -> list[str]:
    history = ["".join(line[x].data for x in range(COLS)).rstrip() for line in screen.history.top]
    return history + [line.rstrip() for line in screen.display]


@pytest.mark.slow
def test_nothing_written_to_the_terminal_is_corrupted(tmp_path):
    rc, tty, at_prompt = _run_interactive(["run", "--out", tmp_path / "r", SCRIPTS / "terminal" / "writers.py",
                                           "40"], tmp_path)
    assert rc == 0, tty[-2000:]
    status = (tmp_path / "r" / "status.jsonl").read_text() if (tmp_path / "r" / "status.jsonl").exists() else ""
    assert b"steps/s" in tty, (f"the status line was never drawn; the terminal got: {tty[-4000:]!r}; "
                               f"the run's status-line entries: {[x for x in status.splitlines() if 'status-line' in x]}")
    lines = _lines(_screen(tty))
    for i in range(0, 40, 8):
        for expected in (f"print line {i}", f"os.write stdout line {i}", f"os.write stderr line {i}",
                         f"child line {i}", f"open line {i} ... done"):
            assert expected in lines, (expected, lines)
    assert "hello bob" in lines
    # haiprof's verdict follows the script's last line right below it: the status line's redraws are not taken
    # for an open line of the script's (runtime/stderr_tail.py), so no blank row comes before it
    after = lines[lines.index("hello bob") + 1]
    assert after.startswith("haiprof: ") and "report:" not in after, lines[-8:]
    # The status text never shares a row with the script's text.
    assert not [x for x in lines if "haiprof:" in x and ("line" in x or "name?" in x)], lines

    # While the script waits at input(): the prompt intact, the cursor right after it, the status on the
    # bottom row (drawn during the wait, not over the prompt).
    assert at_prompt is not None, "the prompt never appeared"
    screen = _screen(at_prompt)
    row = screen.display[screen.cursor.y].rstrip()
    assert row == PROMPT.decode().rstrip() and screen.cursor.x == len(PROMPT), (row, screen.cursor.x)
    assert screen.display[ROWS - 1].startswith("haiprof: "), screen.display[ROWS - 1]
    assert screen.cursor.y < ROWS - 1
    redraws_while_waiting = at_prompt.split(PROMPT)[-1].count(b"\x1b8")
    assert redraws_while_waiting >= 2, at_prompt.split(PROMPT)[-1]

    # At the end the row is given back: no scroll region left, no status text on the screen.
    end = _screen(tty)
    assert end.margins is None or (end.margins.top, end.margins.bottom) == (0, ROWS - 1)
    assert not [x for x in end.display if x.startswith("haiprof: ") and "steps" in x and "·" in x]
    assert any(x.startswith("haiprof: report: ") or "report: " in x for x in lines), lines[-10:]


def test_a_resized_terminal_gets_its_rows_back(tmp_path):
    """Terminals reset the scroll region on resize: the status steps aside for the rest of the run."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    env = dict(os.environ, HAIPROF_PROGRESS="1", TERM="xterm")
    proc = subprocess.Popen([*HAIPROF, "run", "--out", str(tmp_path / "r"), str(SCRIPTS / "exits.py"), "loop", "60"],
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env, cwd=tmp_path)
    state = {"resized": None}

    def resize(got):
        if state["resized"] is None and b"steps/s" in got:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS + 6, COLS, 0, 0))
            state["resized"] = len(got)

    got = read_pty(master, proc, 120, resize)
    resized = state["resized"]
    os.close(slave)
    os.close(master)
    assert proc.wait(timeout=30) == 0
    assert resized is not None, got[-2000:]
    after = got[resized:]
    status = RunDir(tmp_path / "r").read_status()   # the run says why the line stopped
    assert status["status-line"]["reason"] == f"stepped aside: the terminal was resized ({ROWS} -> {ROWS + 6} rows)"
    # At most one frame already on its way when the size changed; then the region is reset and nothing drawn.
    assert after.count(b"steps/s") <= 1, after
    assert b"\x1b[r" in after
    assert b"steps/s" not in after.split(b"\x1b[r", 1)[1]


@pytest.mark.parametrize("unreadable", [1, 5])
def test_a_terminal_size_that_cannot_be_read_once_is_no_resize(tmp_path, unreadable):
    """A size read that fails (0 rows) skips that frame; the line steps aside only when it keeps failing (a
    loaded machine's suite once read "24 -> 0 rows" and took it for a resize)."""
    from haiprof.runtime.progress import UNSIZED, LiveStatus

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    stream = os.fdopen(slave, "w")
    stopped = []
    live = LiveStatus(tmp_path / "phases.bin", stream, refresh_s=0.02, on_stop=lambda *a: stopped.append(a))
    assert live._reserve()
    real, reads = live._size, []

    def size():
        reads.append(1)
        return (0, 0) if 1 <= len(reads) <= unreadable else real()

    live._size = size
    live._thread = __import__("threading").Thread(target=live._loop, daemon=True)
    live._thread.start()
    deadline = time.monotonic() + 10
    got = b""
    while time.monotonic() < deadline and len(reads) < unreadable + 4 and not stopped:
        got += os.read(master, 65536) if __import__("select").select([master], [], [], 0.05)[0] else b""
    live.stop()
    stream.close()
    os.close(master)
    if unreadable < UNSIZED:
        assert stopped == [] and len(reads) >= unreadable + 4, stopped
        assert b"haiprof: " in got   # drawn again once the size reads
    else:
        assert stopped == [(True, "stepped aside: the terminal's size could not be read")]
