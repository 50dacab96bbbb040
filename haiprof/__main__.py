"""`python -m haiprof`.

`-m` puts the working directory first on sys.path, so a user's orjson.py or pandas.py beside their script stood
in for haiprof's own dependencies: haiprof failed before the script started, or lost the report. This process
drops that entry (haiprof itself is imported already; its modules are found through the package). The script's
own python gets the sys.path python would give it.
"""
import os
import sys


def _drop_working_directory() -> None:
    if not sys.path or sys.flags.safe_path:
        return
    try:
        first_is_cwd = os.path.realpath(sys.path[0] or os.curdir) == os.path.realpath(os.getcwd())
    except OSError:   # the working directory is gone
        first_is_cwd = sys.path[0] == ""
    if first_is_cwd:
        del sys.path[0]


_drop_working_directory()

from haiprof.cli import main  # noqa: E402 (after the path is ours)

if __name__ == "__main__":
    sys.exit(main())
