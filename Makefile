# The README's two commands. Each sets itself up on a fresh machine: a .venv in the repo, torch pinned to the
# local CPU build (constraints.txt) so nothing pulls a CUDA build.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-stress browser clean docs

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	rm -rf haiprof-runs/demo   # the demo's own directory: haiprof never writes into an earlier run
	$(VENV)/bin/haiprof run --out haiprof-runs/demo examples/input_bound.py --batches 40

# The report tests drive a real headless Chromium; install Debian's when absent (CI runs as root).
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { echo "installing chromium for the report tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 || \
	    echo "chromium could not be installed: the browser tests will fail"; }

# Two pytest-xdist workers, a test file to each (a file's shared runs are made once). The sources are compiled first:
# with PYTHONDONTWRITEBYTECODE set, each of the suite's hundreds of haiprof processes compiled them again.
COMPILE := $(PY) -m compileall -q haiprof collectors analyzers fixes >/dev/null
PYTEST := $(PY) -m pytest -q -n 2 --dist loadfile

test: $(STAMP) browser
	$(COMPILE)
	$(PYTEST)

# The suite on a loaded machine: a test's verdict must not depend on how many cores are free. Each test shares the
# two cores with the other worker's test and a process that keeps one core busy the whole time.
test-stress: $(STAMP) browser
	$(COMPILE)
	$(PY) tests/with_cpu_hogs.py 1 -- $(PYTEST)

clean:
	rm -rf $(VENV) haiprof-runs .pytest_cache

# The README's report screenshot (docs/report.png): profile the example, shoot the report in headless Chromium.
docs: $(STAMP) browser
	$(PY) docs/build.py --png docs/report.png
