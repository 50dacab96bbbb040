"""Collectors: read-only hooks and samplers that write into a run directory.

A collector never changes how training runs; one that fails records why and stops, the training goes on.
"""
