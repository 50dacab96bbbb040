"""What torchrun starts for each rank of `haiprof run --nproc-per-node …` / `haiprof run -- torchrun …`: a file,
run as a script, alone in its folder. It runs haiprof.runtime.worker's main with the same arguments.

Why a file and not `python -m haiprof.runtime.worker`: `-m` puts the current directory first on sys.path, so a
random.py or json.py of the user's there would replace the standard module in haiprof's and torch's own imports
before the script even starts (plain torchrun puts the script's folder there instead). Run as a script, python puts
this folder first, and it holds no module. Later the launcher replaces sys.path[0] with what python gives the
target (the script's folder; the current directory for `-m`), so the script sees python's own sys.path.
"""
import os
import sys


def _import_worker():
    try:
        from haiprof.runtime import worker
    except ModuleNotFoundError as e:
        if e.name != "haiprof":
            raise
        # haiprof was importable in the launching process only through a path this one does not inherit: take the
        # package this file belongs to, and leave sys.path as python made it for the target's sake
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
        sys.path.insert(1, root)
        try:
            from haiprof.runtime import worker
        finally:
            sys.path.pop(sys.path.index(root, 1))
    return worker


if __name__ == "__main__":
    sys.exit(_import_worker().main(sys.argv[1:]))
