"""What a slow step did, read from the trace of the flight recorder's window around it (with Python functions).

`explain(events, own_dirs)` takes the trace's events (Chrome trace dicts), finds the window's longest step (its
"ProfilerStep#k" annotation) and splits that step's time on its thread by what ran, by self time (an event's time
less its children's, so nothing is counted twice):

  * torch ops: the outermost `cpu_op` events;
  * file I/O, sleeping/waiting, host-device syncs and garbage collection: Python functions and ops by name
    (IO_NAMES, WAIT_NAMES, SYNC_NAMES, GC_NAMES);
  * other Python: the rest of the Python functions' self time.

The culprit is the script's own function (not torch's, not the standard library's, not haiprof's: `own_dirs`)
that began inside the step and took the longest: "slow_moments.py(19): save_checkpoint". The result says all
this in one sentence, with the numbers, so the page explains a stall from its trace instead of guessing.
"""
from __future__ import annotations

import re
import sys

# Python builtins (and a few library calls) by what they wait for; matched on the cleaned name
IO_NAMES = re.compile(r"^(fsync|fdatasync|sync|open|write|write_record|read|readinto|readline|readlines|flush|pwrite|pread|"
                      r"sendfile|sendall|send|recv|recv_into|copyfileobj|listdir|scandir|stat|rename|replace|"
                      r"unlink|makedirs|mkdir)\b")
WAIT_NAMES = re.compile(r"^(sleep|wait|acquire|select|poll|join|epoll|get)\b")
SYNC_NAMES = re.compile(r"^(cudaDeviceSynchronize|cudaStreamSynchronize|cudaEventSynchronize|cudaMemcpy\b|"
                        r"aten::item|aten::_local_scalar_dense|synchronize)")
GC_NAMES = re.compile(r"^(collect|gc\.collect)\b")   # gc.collect(), or the window's annotation of an automatic one
STEP_PREFIX = "ProfilerStep#"
LIBRARY = re.compile(r"(^|/)(torch|site-packages|dist-packages|lib/python3[.\d]*)/|^<frozen |^threading\.py|"
                     r"^(contextlib|functools|abc|typing|copy|os|io|pickle|zipfile|tempfile)\.py")
TOP = 5


def clean(name: str) -> str:
    """'<built-in method write of _io.BufferedWriter object at 0x7f..>' -> 'write'; 'torch/x.py(3): f' stays."""
    m = re.match(r"<built-in (?:method|function) ([\w.]+)", name)
    return m.group(1) if m else name


def _kind(cat: str, name: str) -> str:
    short = clean(name)
    if SYNC_NAMES.match(short):
        return "sync"
    if GC_NAMES.match(name):
        return "gc"
    if cat == "python_function" and name.startswith("<built-in"):
        if IO_NAMES.match(short):
            return "io"
        if WAIT_NAMES.match(short):
            return "wait"
        if GC_NAMES.match(short):
            return "gc"
    return "ops" if cat == "cpu_op" else "python"


def _self_times(events: list) -> list[tuple[dict, float, bool]]:
    """(event, self µs, inside a torch op) for nested events on one thread, sorted by start."""
    order = sorted(events, key=lambda e: (float(e["ts"]), -float(e.get("dur", 0))))
    stack: list = []   # [event, end, child µs, in op]
    out = []

    def pop() -> None:
        ev, _, child, in_op = stack.pop()
        out.append((ev, max(0.0, float(ev.get("dur", 0)) - child), in_op))

    for e in order:
        ts, dur = float(e["ts"]), float(e.get("dur", 0))
        while stack and stack[-1][1] <= ts:
            pop()
        in_op = bool(stack) and (stack[-1][3] or stack[-1][0].get("cat") == "cpu_op")
        if stack:
            stack[-1][2] += min(dur, stack[-1][1] - ts)
        stack.append([e, ts + dur, 0.0, in_op])
    while stack:
        pop()
    return out


def _own(name: str, own_dirs: tuple) -> bool:
    """A function of the script: a file path frame, not a builtin, a library or haiprof's own code."""
    if name.startswith("<") or name.startswith("nn.Module") or not re.search(r"\(\d+\): ", name):
        return False
    path = name.split("(", 1)[0]
    stem = path.rsplit("/", 1)[-1].removesuffix(".py")
    if "/" not in path and stem in sys.stdlib_module_names:   # the profiler names the standard library's files bare
        return False
    return not LIBRARY.search(path) and not any(path.startswith(d) for d in own_dirs)


def explain(events: list, own_dirs: tuple = (), median_step_ms: float | None = None) -> dict | None:
    """The window's slowest step, split by what ran in it (see the module docstring); None without steps."""
    steps = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith(STEP_PREFIX)]
    if not steps:
        return None
    steps.sort(key=lambda e: float(e["ts"]))
    k = max(range(len(steps)), key=lambda i: float(steps[i].get("dur", 0)))
    st = steps[k]
    t0, t1, tid = float(st["ts"]), float(st["ts"]) + float(st.get("dur", 0)), st.get("tid")
    inside = [e for e in events if e is not st and e.get("ph") == "X" and e.get("tid") == tid
              and (e.get("cat") in ("cpu_op", "python_function", "cuda_runtime") or GC_NAMES.match(str(e.get("name"))))
              and t0 <= float(e["ts"]) < t1]
    by_kind = {"ops": 0.0, "io": 0.0, "wait": 0.0, "sync": 0.0, "gc": 0.0, "python": 0.0}
    names: dict = {}
    for ev, self_us, in_op in _self_times(inside):
        name = str(ev.get("name", ""))
        if ev.get("cat") == "cpu_op" and in_op:
            continue   # an op inside an op: its time is the outer op's (counted as the outer one's self)
        kind = "ops" if in_op and ev.get("cat") != "cpu_op" else _kind(str(ev.get("cat")), name)
        if kind == "ops" and ev.get("cat") == "cpu_op":
            self_us = float(ev.get("dur", 0))   # the outermost op: all of it is torch's
        by_kind[kind] += self_us
        if kind != "ops" and ev.get("cat") != "cpu_op":
            key = (clean(name), kind)
            names[key] = names.get(key, 0.0) + self_us
    culprits = [e for e in inside if e.get("cat") == "python_function" and _own(str(e["name"]), own_dirs)]
    culprit = max(culprits, key=lambda e: float(e.get("dur", 0)), default=None)
    step_ms = (t1 - t0) / 1e3
    top = sorted(names.items(), key=lambda kv: -kv[1])[:TOP]
    out = {"step_in_window": k, "steps_in_window": len(steps), "step_ms": round(step_ms, 3),
           "ms": {kind: round(us / 1e3, 3) for kind, us in by_kind.items()},
           "top": [{"name": n, "kind": kd, "ms": round(us / 1e3, 3)} for (n, kd), us in top],
           "culprit": str(culprit["name"]) if culprit is not None else None,
           "culprit_ms": round(float(culprit.get("dur", 0)) / 1e3, 3) if culprit is not None else None}
    out["sentence"] = _sentence(out, median_step_ms)
    return out


WORDS = {"io": "file I/O", "wait": "sleeping or waiting", "sync": "host-device syncs", "gc": "garbage collection",
         "python": "other Python", "ops": "torch ops"}


def _sentence(x: dict, median_ms: float | None) -> str:
    ms = x["ms"]
    parts = []
    for kind in sorted(ms, key=lambda k: -ms[k]):
        if ms[kind] < max(0.5, 0.05 * x["step_ms"]):
            continue
        detail = [t for t in x["top"] if t["kind"] == kind and t["ms"] >= 0.1 * ms[kind]][:3]
        parts.append(f"{WORDS[kind]} {ms[kind]:.3g} ms" +
                     (" (" + ", ".join(f"{t['name']} {t['ms']:.3g} ms" for t in detail) + ")" if detail else ""))
    against = f" against a {median_ms:.3g} ms median step" if median_ms else ""
    where = (f"; {x['culprit_ms']:.3g} ms of it inside {x['culprit']}" if x["culprit"] else "")
    return (f"the traced {x['step_ms']:.3g} ms step{against}: " + (", ".join(parts) or "no traced activity")
            + where)
