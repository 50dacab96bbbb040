"""Analyzers: pure functions, run-directory data in, findings out. No I/O, no plotting, no collectors."""
