"""What runs around the user's script: launcher, session, sidecar sampler, distributed launch and per-rank worker,
rank gather, fix application, live progress. Writes the run directory; never reads it back for analysis."""
