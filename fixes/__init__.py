"""Fixes: the only code that changes how training runs, each behind `haiprof run --fix ID`."""
