"""The scripts at the end of every haiprof page: the figures as JSON data, plotly.js (vendored, gzipped and
base64-encoded: ~660 kB instead of 1.5 MB, inflated in the browser by DecompressionStream) and the small scripts
that draw the figures with Plotly.newPlot and re-bucket the step chart on zoom. No network: the page is one file.
"""
from __future__ import annotations

import base64
import functools
import gzip
from pathlib import Path

from .escape import json_for_script

PLOTLY_VERSION = "4.1.1"   # plotly.js-cartesian-dist-min on npm: bar, scatter, heatmap (vendor/README.md)
HERE = Path(__file__).parent
BUNDLE = HERE / "vendor" / "plotly-cartesian.min.js"

CSS = ".chart{min-height:40px}.chart .js-plotly-plot{width:100%}a.zoom-step{cursor:pointer}"


@functools.lru_cache(maxsize=1)
def plotly_b64() -> str:
    """The bundle gzipped (mtime 0: the same bytes every time) and base64-encoded; base64 holds no '<', so it
    cannot end the script element it sits in."""
    return base64.b64encode(gzip.compress(BUNDLE.read_bytes(), 9, mtime=0)).decode("ascii")


@functools.lru_cache(maxsize=1)
def _our_js() -> str:
    return "\n".join((HERE / "js" / name).read_text(encoding="utf-8") for name in ("steps.js", "draw.js"))


def scripts(figs: dict) -> str:
    """The page's closing scripts (put them last in <body>: they look up the chart elements)."""
    return (f'<script type="application/json" id="haiprof-figures">{json_for_script(figs)}</script>'
            f'<script type="application/octet-stream" id="haiprof-plotly">{plotly_b64()}</script>'
            f'<script>{_our_js()}</script>')
