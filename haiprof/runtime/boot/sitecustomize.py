"""haiprof's start-up hook in the script's own python (`haiprof run` starts `python SCRIPT ARGS` with this folder
first on PYTHONPATH: runtime/child_run.py). Python imports it at start-up, before the script's folder is on
sys.path. It takes this folder off sys.path and PYTHONPATH off the environment again (the script and its own
subprocesses see python's), runs the real sitecustomize, if any, then starts haiprof's recorder
(runtime/child_boot.py) and lets python run the script as it always does.

Alone in its folder: this folder must hold nothing else a script could import.
"""
import os
import sys


def _haiprof_boot():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    boot = os.environ.pop("HAIPROF_BOOT", None)
    before = os.environ.pop("HAIPROF_BOOT_PYTHONPATH", None)   # absent: PYTHONPATH was unset
    if before is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = before
    # The real sitecustomize (a distribution's, a site's), found now that this folder is off the path. Its errors
    # are said as site.py says them.
    ours = sys.modules.pop("sitecustomize")
    try:
        import sitecustomize  # noqa: F401
    except ImportError as e:
        if e.name != "sitecustomize":
            print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(e).__name__}: {e}",
                  file=sys.stderr)
    except Exception as e:
        print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(e).__name__}: {e}", file=sys.stderr)
    sys.modules.setdefault("sitecustomize", ours)   # the import that runs this module takes its entry back
    if not boot:
        return
    try:
        from haiprof.runtime import child_boot
    except ModuleNotFoundError as e:
        if e.name != "haiprof":
            raise
        # haiprof was importable in `haiprof run` only through its current directory: take the package this file
        # belongs to, and leave sys.path as python makes it for the script
        root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
        sys.path.insert(0, root)
        try:
            from haiprof.runtime import child_boot
        finally:
            sys.path.remove(root)
    child_boot.start(boot)


try:
    _haiprof_boot()
except Exception as e:   # never the script's failure: it runs without haiprof's recorder, and says so
    print(f"haiprof: the recorder could not start in the script's python ({type(e).__name__}: {e}); the script "
          f"runs unprofiled", file=sys.stderr)
finally:
    del _haiprof_boot
