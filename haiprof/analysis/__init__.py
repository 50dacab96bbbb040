"""Run directory in, summary.json and report out: the wiring between the files, the analyzers and the renderers."""
