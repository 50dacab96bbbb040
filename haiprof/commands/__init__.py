"""One module per CLI command (`haiprof run|report|analyze|compare|export|doctor`); haiprof/cli.py dispatches."""
