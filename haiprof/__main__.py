import sys

from haiprof.cli import main

if __name__ == "__main__":
    sys.exit(main())
