"""Write a large synthetic Kineto trace by repeating a real one (default: HTA's df_index_resolver test trace).

Each copy is shifted past the previous one in time and gets fresh correlation / external ids, so the result is a
longer recording of the same training loop: kernels, runtime calls, operators, flows, ProfilerStep annotations.

    python benchmarks/make_synthetic_trace.py OUT.json --size-gb 1.0 [--source TRACE.json.gz]
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
from pathlib import Path

DEFAULT_SOURCE = Path(__file__).resolve().parent.parent / "tests/data/hta/df_index_resolver/df_index_resolver.json.gz"
ID_ARGS = ("correlation", "External id")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--size-gb", type=float, default=1.0)
    ap.add_argument("--source", default=str(DEFAULT_SOURCE))
    a = ap.parse_args()
    opener = gzip.open if a.source.endswith(".gz") else open
    with opener(a.source, "rt", encoding="utf-8") as f:
        trace = json.load(f)
    events = trace.pop("traceEvents")
    timed = [e for e in events if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M"]
    t0 = min(e["ts"] for e in timed)
    span = max(e["ts"] + e.get("dur", 0) for e in timed) - t0 + 1000
    id_span = 1 + max([e.get("id", 0) for e in events if isinstance(e.get("id"), int)] +
                      [e.get("args", {}).get(k, 0) for e in events for k in ID_ARGS
                       if isinstance(e.get("args", {}).get(k), int)])
    step_names = {e["name"] for e in events if str(e.get("name", "")).startswith("ProfilerStep#")}
    target = int(a.size_gb * 2**30)
    out = Path(a.out)
    with open(out, "w", encoding="utf-8") as f:
        head = json.dumps(trace, indent=1)[:-2]          # the metadata keys, without the closing brace
        f.write(head + ',\n  "traceEvents": [\n')
        copy, first = 0, True
        while f.tell() < target:
            dt, di = copy * span, copy * id_span
            for e in events:
                if e.get("ph") == "M" and copy:
                    continue
                e2 = dict(e)
                if "ts" in e2 and e2.get("ph") != "M":
                    e2["ts"] = e2["ts"] + dt
                if isinstance(e2.get("id"), int):
                    e2["id"] = e2["id"] + di
                args = e2.get("args")
                if isinstance(args, dict) and any(k in args for k in ID_ARGS):
                    args = dict(args)
                    for k in ID_ARGS:
                        if isinstance(args.get(k), int) and args[k] >= 0:
                            args[k] += di
                    e2["args"] = args
                if e2.get("name") in step_names:   # keep ProfilerStep numbers unique across copies
                    e2["name"] = f"ProfilerStep#{int(e2['name'].split('#')[1]) + copy * 1000}"
                f.write(("  " if first else ",\n  ") + json.dumps(e2))
                first = False
            copy += 1
        f.write("\n  ]\n}\n")
    print(f"wrote {out}: {os.path.getsize(out) / 2**30:.2f} GiB, {copy} copies of {a.source}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
