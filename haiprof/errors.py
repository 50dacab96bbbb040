"""Errors every layer may raise. Here, at the bottom, so that nothing below the command line imports it."""

USAGE_ERROR = 2   # exit code for bad input


class UserError(Exception):
    """Bad input from the user: printed as one line, exit code USAGE_ERROR."""
