"""Run a command beside N processes that each keep one core busy (`make test-stress`: the suite on a loaded
machine). The hogs are killed when the command ends; its exit code is returned.

    python tests/with_cpu_hogs.py 2 -- python -m pytest -q
"""
import os
import signal
import subprocess
import sys


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--" or not argv[0].isdigit():
        print("usage: with_cpu_hogs.py N -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(int(argv[0]))]
    print(f"with_cpu_hogs: {len(hogs)} busy process(es) beside the command", file=sys.stderr, flush=True)
    try:
        return subprocess.call(argv[2:])
    except KeyboardInterrupt:
        return 130
    finally:
        for hog in hogs:
            try:
                os.killpg(hog.pid, signal.SIGKILL)
            except OSError:
                pass
            hog.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
