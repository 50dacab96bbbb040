"""Reliability of the command line: terminal and pipes, bad values, malformed run directories, short-lived
DataLoader workers. Every test runs `python -m haiprof` as a real subprocess."""
import json
import re
import shutil
import subprocess
import time

import pytest

from conftest import HAIPROF, SCRIPTS, load_summary, run_haiprof, run_on_pty, phase_records

TRACEBACK_MARKS = ("Traceback", "BrokenPipe", "Exception ignored")


@pytest.fixture(scope="module")
def traced_run(seeded):
    """One real run with the default tracing window, shared by the tests that only read it (conftest.seeded)."""
    _, out, r = seeded
    return out, r


def _fresh_copy(run, tmp_path, name="copy"):
    dst = tmp_path / name
    shutil.copytree(run, dst)
    for derived in ("summary.json", "report.html"):
        (dst / derived).unlink(missing_ok=True)
    return dst


# -- 9a: the live status line never glues itself to the script's lines ---------------------------------------------
def _run_on_pty(args, timeout=60):
    """stdout and stderr both on one pseudo-terminal, as in an interactive shell; returns (rc, bytes seen)."""
    rc, got, _ = run_on_pty(args, timeout, on_pty=("stdout", "stderr"))
    return rc, got


def test_script_lines_never_start_after_the_status_text(tmp_path):
    rc, tty = _run_on_pty(["run", "--trace-steps", "0", "--out", tmp_path / "r", SCRIPTS / "chatty_train.py", "2"])
    assert rc == 0, tty[-2000:]
    assert b"steps" in tty and b"\x1b[1;23r" in tty, tty[-2000:]   # the status row was reserved and drawn
    starts = [m.start() for m in re.finditer(rb"script-line \d+|script-done", tty)]
    assert len(starts) >= 5, tty[-2000:]
    glued = [tty[max(0, i - 60):i + 16] for i in starts
             if not (i == 0 or tty[:i].endswith(b"\n") or tty[:i].endswith(b"\x1b8"))]   # after a redraw: the
    assert not glued, glued                                                  # cursor restored where it was
    # what the terminal shows (tests/test_terminal_status.py rebuilds the screen; here: no line holds both)
    lines = tty.replace(b"\x1b8", b"\n").replace(b"\x1b7", b"\n").split(b"\n")
    glued = [x for x in lines if b"haiprof:" in x and (b"script-line" in x or b"script-done" in x)]
    assert not glued, glued


# -- 9b: a reader that goes away ----------------------------------------------------------------------------------
def _closed_reader(args):
    """Run haiprof with stdout on a pipe whose reader has already gone (what `| head -1` leads to)."""
    proc = subprocess.Popen([*HAIPROF, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()   # before the child writes anything: its first write or final flush gets EPIPE
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    return proc.wait(timeout=60), err


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["doctor", "--json"], ["doctor"], ["compare-json"]])
def test_closed_pipe_is_quiet(args, traced_run, tmp_path):
    if args == ["compare-json"]:
        run = traced_run[0]
        args = ["compare", "--json", run, _fresh_copy(run, tmp_path)]
    rc, err = _closed_reader(args)
    assert not any(m in err for m in TRACEBACK_MARKS), err
    assert rc != 0   # the output was not delivered


def test_closed_pipe_through_a_shell_head():
    r = subprocess.run(["bash", "-c", " ".join(HAIPROF) + " doctor --json | head -1"], capture_output=True,
                       text=True, timeout=60)
    assert r.stdout.startswith("{"), r.stdout
    assert not any(m in r.stderr for m in TRACEBACK_MARKS), r.stderr


# -- 9c: Kineto's own lines stay off the console --------------------------------------------------------------------
def test_tracing_window_prints_nothing_of_its_own(seeded):
    plain, out, r = seeded
    assert (out / "trace.json.gz").is_file()   # the window ran, so Kineto had its say somewhere
    assert r.stdout == plain.stdout
    assert r.stderr == plain.stderr == "", r.stderr
    log = (out / "kineto.log").read_text() if (out / "kineto.log").is_file() else ""
    for line in log.splitlines():   # whatever Kineto said went to the run directory instead
        assert line not in r.stderr and line not in r.stdout


# -- 10: bad values are refused before anything runs ----------------------------------------------------------------
def _refused(r, out):
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("haiprof: error: "), r.stderr
    assert r.stdout == ""          # the script never started
    assert not out.exists()        # and no run directory was made


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0"])
def test_sample_interval_must_be_finite_and_positive(value, tmp_path):
    out = tmp_path / "r"
    r = run_haiprof("run", "--sample-interval", value, "--out", out, SCRIPTS / "seeded_train.py")
    _refused(r, out)
    assert "--sample-interval" in r.stderr


@pytest.mark.parametrize("spec,says", [("compress=nonsense", "no variant 'nonsense'"),
                                       ("prefetch=fast", "no variant 'fast'"),
                                       ("nosuchfix", "unknown fix"),
                                       ("", "--fix needs at least one fix id"),
                                       (" , ", "--fix needs at least one fix id")])
def test_fix_spec_checked_before_the_run(spec, says, tmp_path):
    out = tmp_path / "r"
    t0 = time.monotonic()
    r = run_haiprof("run", "--fix", spec, "--out", out, SCRIPTS / "seeded_train.py")
    _refused(r, out)
    assert says in r.stderr
    assert time.monotonic() - t0 < 15


# -- 10: malformed run directories --------------------------------------------------------------------------------
BAD_PHASE_LINES = ['["forward", 1e400, 3]', '["forward", "x", 3]', "[1, 2, 3]", "{}", '"forward"',
                   '["forward", true, 5]']
# Well-formed intervals with odd extra fields: kept, and the readers of those fields must cope.
ODD_PHASE_LINES = ['["dataloader", 1, 2, "cpu", []]', '["@loader", 1, 1, "two"]', '["@batch", 1, 1, {}]',
                   '["@ddp", 1, 1, 1e400]']


def _report(run, *extra):
    r = run_haiprof("report", run, *extra, timeout=60)
    assert not any(m in r.stderr for m in TRACEBACK_MARKS), r.stderr
    return r


def test_report_skips_malformed_phase_records(traced_run, tmp_path):
    run = _fresh_copy(traced_run[0], tmp_path)
    good = load_summary(traced_run[0])
    with open(run / "phases.jsonl", "a") as f:
        f.write("\n".join(BAD_PHASE_LINES + ODD_PHASE_LINES) + "\n")
    r = _report(run, "--quiet")
    assert r.returncode == 0, r.stderr
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("haiprof: warning:")]
    assert warnings == [f"haiprof: warning: phases.jsonl: {len(BAD_PHASE_LINES)} malformed record(s) skipped"], \
        r.stderr
    assert (run / "report.html").is_file()
    assert load_summary(run)["steps"] == good["steps"]   # the good records still make the same steps


@pytest.mark.parametrize("meta", ["[1, 2]", '"a string"', "1e400",
                                  '{"exit_code": "zero", "cpu_affinity": "x", "cpu_count": [2], "command": 5, '
                                  '"start_monotonic_ns": 1e400, "argv": "x"}'])
def test_report_with_meta_of_the_wrong_shape(meta, traced_run, tmp_path):
    run = _fresh_copy(traced_run[0], tmp_path)
    if meta.startswith("{"):
        fields = json.loads((run / "meta.json").read_text())
        fields.update(json.loads(meta.replace("1e400", "1e300")))
        text = json.dumps(fields).replace("1e+300", "1e400")
    else:
        text = meta
    (run / "meta.json").write_text(text)
    r = _report(run, "--quiet")
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("haiprof: warning: meta.json") == 1, r.stderr
    assert (run / "report.html").is_file() and load_summary(run)["steps"] > 0


def _corruptions(text: str, jsonl: bool) -> dict:
    half = text[: len(text) // 2]
    out = {"empty": "", "half": half, "garbage": "\x00\xff not json {[", "list": "[]", "string": '"x"',
           "huge": "1e400"}
    if jsonl:
        lines = [ln for ln in text.splitlines() if ln.strip()]

        def retype(line):   # every value of the record turned into a value of another type
            try:
                rec = json.loads(line)
            except ValueError:
                return line
            if isinstance(rec, dict):
                return json.dumps({k: ("x" if isinstance(v, (int, float)) else 1e300) for k, v in rec.items()}
                                  ).replace("1e+300", "1e400")
            if isinstance(rec, list):
                return json.dumps([7, *[str(v) for v in rec[1:]]])
            return line
        mixed = [retype(ln) if i % 2 else ln for i, ln in enumerate(lines)]
        out.update(retyped="\n".join(mixed) + "\n", wrong_rows="\n".join(lines + ["[]", "{}", "null", "1e400"]))
    return out


@pytest.mark.parametrize("name", ["meta.json", "phases.bin", "status.jsonl", "samples/system.jsonl",
                                  "samples/storage.jsonl", "losses.json", "trace.json.gz"])
def test_report_survives_corruption_of_every_file(name, traced_run, tmp_path):
    src = traced_run[0] / name
    if not src.is_file():
        pytest.skip(f"{name} not written on this host")
    raw = src.read_bytes()
    text = raw.decode("utf-8", errors="replace")
    jsonl = name.endswith(".jsonl")
    if name == "phases.bin":   # binary chunks: cut short, a flipped byte, empty, garbage
        flipped = bytearray(raw)
        flipped[len(raw) // 2] ^= 0xFF
        bodies = {"cut": raw[:len(raw) // 2], "flipped": bytes(flipped), "empty": b"",
                  "garbage": bytes(range(256)) * 8}
    else:
        bodies = {k: v.encode() for k, v in _corruptions(text, jsonl).items()}
    procs = []
    for label, body in bodies.items():
        run = _fresh_copy(traced_run[0], tmp_path, label)
        (run / name).write_bytes(body)
        procs.append((label, run, subprocess.Popen([*HAIPROF, "report", "--quiet", str(run)],
                                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    for label, run, proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode in (0, 1, 2), (label, proc.returncode, err)
        assert not any(m in err for m in TRACEBACK_MARKS), (label, err)
        if name in ("phases.bin", "samples/system.jsonl", "samples/storage.jsonl"):
            assert proc.returncode == 0, (label, err)
            assert (run / "report.html").is_file() and (run / "summary.json").is_file(), label


# -- 11: short-lived DataLoader workers ------------------------------------------------------------------------------
def test_short_lived_workers_are_counted_from_the_dataloader(tmp_path):
    out = tmp_path / "r"
    # A sampling interval longer than the run: the system sampler never sees the two workers alive.
    r = run_haiprof("run", "--quiet", "--sample-interval", "30", "--trace-steps", "0", "--out", out,
                    SCRIPTS / "short_loader.py")
    assert r.returncode == 0, r.stderr
    marks = [r for r in phase_records(out) if r[0] == "@loader"]
    assert [m[3] for m in marks] == [2]   # once per iterator, not per batch
    s = load_summary(out)
    io = [f for f in s["findings"] if f["kind"] == "io"]
    assert io, s["headline"]
    split = io[0]["evidence"]["input_split"]
    assert split["loader_mode"] == "2 DataLoader worker(s)", split
    text = json.dumps(s) + (out / "report.html").read_text()
    assert "num_workers=0" not in text


def test_runs_without_the_loader_mark_still_read(tmp_path):
    from haiprof.analyzers.input_split import classify, loader_of_records
    finding = {"kind": "io", "severity": "high", "message": "Input-bound", "evidence": {}, "fixes": ["prefetch"]}
    records = [["dataloader", 0, 10_000_000, 9_000_000, 0], ["@step", 10_000_000, 10_000_000]]
    old = classify(finding, loader_of_records(records), [], {}, 2, 0.7, 0.5)
    assert "num_workers=0" in old["message"]   # no mark, no sampled workers: the old reading
    new = classify(finding, loader_of_records(records + [["@loader", 0, 0, 3]]), [], {}, 2, 0.7, 0.5)
    assert new["evidence"]["input_split"]["loader_mode"] == "3 DataLoader worker(s)"
