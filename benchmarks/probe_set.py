"""The adversarial probe set: each script in benchmarks/probes/ must behave under `haiprof run` as under `python`.

    python benchmarks/probe_set.py [-j N] [--only NAME[,NAME...]] [--quiet-too]

Each probe runs twice from the same fresh working directory (a copy of the probe, of probes/_common/ (the shared
model most probes import) and of probes/_files/<probe>/, if any): `python PROBE ARGS` and `python -m haiprof run --out OUT [HAIPROF_ARGS] PROBE ARGS`. Compared: the exit
status, stdout byte for byte, stderr once haiprof's own lines are taken out (each a whole line starting
`haiprof: `; python's own stderr has none), the files left in the working directory (names and bytes), and that
OUT holds summary.json and report.html. `--quiet-too` also runs `haiprof run --quiet`, whose stderr must be
python's byte for byte. A probe's docstring says what it tries (first line) and may set, one per line:

    args: ARGS                the script's own arguments (split at spaces; \\xff escapes give non-UTF-8 bytes)
    module: NAME              run `-m NAME` instead of the probe file (the probe is still copied)
    haiprof-args: ARGS        haiprof run's options, before the script
    stdin: TEXT               bytes fed to stdin (\\n escapes); empty stdin otherwise
    no_report: WHY            no run directory is expected (the process is SIGKILLed, os._exit ...)
    expected_diff: WHY        a known difference: printed as "known", not green
    (an indented line goes on with the key above it)

Exits 1 when any probe differs (a "known" one included), 0 when all are green.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

PROBES = Path(__file__).resolve().parent / "probes"
FILES = PROBES / "_files"
COMMON = PROBES / "_common"
TIMEOUT_S = 300   # a loaded machine: a run of a few seconds can take minutes
OWN_PREFIX = b"haiprof: "
KEYS = ("args", "haiprof-args", "stdin", "module", "no_report", "expected_diff")
RUN_DIR_ENV = "PROBE_RUN_DIR"   # where haiprof's run directory is (control files); the same path under python


@dataclass
class Probe:
    name: str
    path: Path
    what: str
    args: list = field(default_factory=list)
    haiprof_args: list = field(default_factory=list)
    stdin: bytes = b""
    module: str = ""
    no_report: str = ""
    expected_diff: str = ""


def _unescape(text: str) -> bytes:
    return text.encode().decode("unicode_escape").encode("latin-1")


def _docstring(source: bytes) -> str:
    """The probe's docstring as written (escapes unprocessed: args and stdin take them); a probe that is itself a
    syntax error (or holds a NUL byte) still has it first."""
    m = re.match(rb'\s*"""(.*?)"""', source, re.S)
    return m.group(1).decode() if m else ""


def load_probe(path: Path) -> Probe:
    doc = _docstring(path.read_bytes())
    lines = []
    for line in doc.splitlines():   # an indented line goes on with the one before it
        if lines and line[:1] == " " and line.strip():
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    probe = Probe(path.stem, path, lines[0] if lines else "")
    for line in lines[1:]:
        key, sep, value = line.partition(":")
        key = key.strip()
        if not sep or key not in KEYS:
            continue
        value = value.strip()
        if key == "args":
            probe.args = [_unescape(a) for a in value.split()]
        elif key == "haiprof-args":
            probe.haiprof_args = shlex.split(value)
        elif key == "stdin":
            probe.stdin = _unescape(value)
        else:
            setattr(probe, key, value)
    return probe


def all_probes() -> list[Probe]:
    return [load_probe(p) for p in sorted(PROBES.glob("*.py")) if not p.name.startswith("_")]


@dataclass
class Result:
    rc: int
    stdout: bytes
    stderr: bytes
    files: dict


def _fresh_cwd(probe: Probe, cwd: Path) -> None:
    shutil.rmtree(cwd, ignore_errors=True)
    cwd.mkdir(parents=True)
    shutil.copy2(probe.path, cwd / probe.path.name)
    shutil.copytree(COMMON, cwd, dirs_exist_ok=True)   # the shared model most probes import
    extra = FILES / probe.name
    if extra.is_dir():
        shutil.copytree(extra, cwd, dirs_exist_ok=True)


def _files(cwd: Path) -> dict:
    out = {}
    for root, dirs, names in os.walk(cwd):
        dirs[:] = [d for d in dirs if d != "__pycache__"]   # bytecode caches: python's, not the script's output
        for name in names:
            p = Path(root) / name
            out[str(p.relative_to(cwd))] = p.read_bytes() if p.is_file() and not p.is_symlink() else b"<special>"
    return out


def _env(run_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HAIPROF_")}
    repo = str(Path(__file__).resolve().parent.parent)
    env.update({RUN_DIR_ENV: str(run_dir)}, PYTHONHASHSEED="0", HAIPROF_PROGRESS="0", OMP_NUM_THREADS="1",
               LC_ALL="C.UTF-8",
               PYTHONPATH=os.pathsep.join(p for p in (repo, env.get("PYTHONPATH")) if p))
    return env


def run_once(probe: Probe, cwd: Path, argv: list, run_dir: Path) -> Result:
    _fresh_cwd(probe, cwd)
    shutil.rmtree(run_dir, ignore_errors=True)
    try:
        p = subprocess.run(argv, cwd=cwd, input=probe.stdin, capture_output=True, env=_env(run_dir), timeout=TIMEOUT_S)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = "timeout", e.stdout or b"", e.stderr or b""
    return Result(rc, out, err, _files(cwd))


def own_lines_removed(stderr: bytes, separators: bool = False) -> bytes:
    """stderr less haiprof's own lines: whole lines that start with `haiprof: `. With `separators`, also the
    newline haiprof puts before its first line where the script left its last line open (`progress 100%`)."""
    lines = stderr.splitlines(keepends=True)
    kept = [line for line in lines if not line.startswith(OWN_PREFIX)]
    if separators:
        kept = [line[:-1] if line.endswith(b"\n") and not line.endswith(b"\r\n") and i + 1 < len(lines)
                and lines[i + 1].startswith(OWN_PREFIX) else line
                for i, line in enumerate(lines) if not line.startswith(OWN_PREFIX)]
    return b"".join(kept)


def _first_diff(a: bytes, b: bytes) -> str:
    i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    return f"at byte {i}: python {a[max(0, i - 30):i + 50]!r} / haiprof {b[max(0, i - 30):i + 50]!r}"


def compare(py: Result, hp: Result, out_dir: Path | None, quiet: Result | None = None) -> list[str]:
    """The differences between a python run and a haiprof run of the same probe; [] when it behaves alike."""
    diffs = [f"{who} run timed out after {TIMEOUT_S} s" for who, r in (("python", py), ("haiprof", hp))
             if r.rc == "timeout"]
    if diffs:   # a killed run says nothing about haiprof's behaviour
        return diffs
    if py.rc != hp.rc:
        diffs.append(f"rc: python {py.rc}, haiprof {hp.rc}")
    if py.stdout != hp.stdout:
        diffs.append("stdout " + _first_diff(py.stdout, hp.stdout))
    if any(line.startswith(OWN_PREFIX) for line in py.stderr.splitlines()):
        diffs.append("python's own stderr has 'haiprof: ' lines: the comparison cannot tell them apart")
    if py.stderr not in (own_lines_removed(hp.stderr), own_lines_removed(hp.stderr, separators=True)):
        diffs.append("stderr (haiprof lines out) " + _first_diff(py.stderr, own_lines_removed(hp.stderr)))
    if py.files != hp.files:
        names = sorted(set(py.files) ^ set(hp.files)) or \
            sorted(k for k in py.files if py.files[k] != hp.files.get(k))
        diffs.append(f"files differ: {names[:5]}")
    if out_dir is not None and not all((out_dir / f).is_file() for f in ("summary.json", "report.html")):
        said = [line for line in hp.stderr.splitlines() if line.startswith(OWN_PREFIX)]
        diffs.append("no summary.json + report.html in the run directory" +
                     (f" (haiprof said: {said[-1][:300]!r})" if said else ""))
    if quiet is not None:
        if quiet.rc != py.rc or quiet.stdout != py.stdout:
            diffs.append("--quiet: rc or stdout differ")
        if quiet.stderr != py.stderr:
            diffs.append("--quiet: stderr " + _first_diff(py.stderr, quiet.stderr))
    return diffs


def check(probe: Probe, base: Path, quiet_too: bool = False) -> tuple[Probe, list[str]]:
    cwd, out = base / "work", base / "out"
    target = ["-m", probe.module] if probe.module else [probe.path.name]
    py = run_once(probe, cwd, [sys.executable, *target, *probe.args], out)
    hp = run_once(probe, cwd, [sys.executable, "-m", "haiprof", "run", "--out", str(out), *probe.haiprof_args,
                               *target, *probe.args], out)
    quiet = None
    if quiet_too:
        quiet = run_once(probe, cwd, [sys.executable, "-m", "haiprof", "run", "--quiet", "--out", str(out),
                                      *probe.haiprof_args, *target, *probe.args], out)
    return probe, compare(py, hp, None if probe.no_report else out, quiet)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="probe names, comma-separated (run in that order)")
    ap.add_argument("-j", type=int, default=1, help="probes run at once (default 1)")
    ap.add_argument("--quiet-too", action="store_true", help="also run haiprof run --quiet (stderr exact)")
    ns = ap.parse_args(argv)
    probes = all_probes()
    if ns.only:
        by_name = {p.name: p for p in probes}
        wanted = list(dict.fromkeys(ns.only.split(",")))   # in the order given
        unknown = [w for w in wanted if w not in by_name]
        if unknown:
            print(f"probe_set: no probe named {', '.join(unknown)}", file=sys.stderr)
            return 2
        probes = [by_name[w] for w in wanted]
    green = known = 0
    with tempfile.TemporaryDirectory(prefix="probes-") as tmp, \
            concurrent.futures.ThreadPoolExecutor(max(1, ns.j)) as pool:
        jobs = [pool.submit(check, p, Path(tmp) / p.name, ns.quiet_too) for p in probes]
        for job in jobs:
            probe, diffs = job.result()
            status = "green" if not diffs else "known" if probe.expected_diff else "DIFF"
            green += status == "green"
            known += status == "known"
            print(f"{status:<6} {probe.name:<28} {probe.what}", flush=True)
            for d in diffs:
                print(f"         {d}", flush=True)
            if diffs and probe.expected_diff:
                print(f"         known: {probe.expected_diff}", flush=True)
    print(f"{green}/{len(probes)} green" + (f", {known} known" if known else ""))
    return 0 if green == len(probes) else 1


if __name__ == "__main__":
    sys.exit(main())
