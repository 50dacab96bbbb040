"""Renderers: a finished RunData in, text out (HTML, console, JSON). They never analyse or collect."""
