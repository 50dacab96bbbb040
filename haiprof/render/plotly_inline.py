"""The scripts at the end of every haiprof page: the figures as JSON data, plotly.js (vendored, gzipped and
base64-encoded: ~660 kB instead of 1.5 MB, inflated in the browser by DecompressionStream) and the small scripts
that draw the figures with Plotly.newPlot and re-bucket the step chart on zoom. No network: the page is one file.
"""
from __future__ import annotations

import base64
import functools
from pathlib import Path

from markupsafe import Markup

from .escape import json_for_script, render

PLOTLY_VERSION = "4.1.1"   # plotly.js-cartesian-dist-min on npm: bar, scatter, heatmap (vendor/README.md)
HERE = Path(__file__).parent
BUNDLE = HERE / "vendor" / "plotly-cartesian.min.js"
# The bundle gzipped once, shipped beside it (`gzip.compress(bundle, 9, mtime=0)`, vendor/README.md): compressing
# 1.5 MB at level 9 took ~0.08 s of every report. tests/test_step_detail.py checks it inflates to the bundle.
BUNDLE_GZ = BUNDLE.with_name(BUNDLE.name + ".gz")


@functools.lru_cache(maxsize=1)
def plotly_b64() -> str:
    """The gzipped bundle base64-encoded; base64 holds no '<', so it cannot end the script element it sits in."""
    return base64.b64encode(BUNDLE_GZ.read_bytes()).decode("ascii")


@functools.lru_cache(maxsize=1)
def _our_js() -> str:
    return "\n".join((HERE / "js" / name).read_text(encoding="utf-8") for name in ("steps.js", "draw.js"))


def scripts(figs: dict) -> Markup:
    """The page's closing scripts (put them last in <body>: they look up the chart elements)."""
    # Markup, and safe so: the JSON has every <, > and & as \u00XX (no "</script>" can close the element) and the
    # scripts are the package's own files; the base64 holds no character the engine would escape.
    return render("plotly.html.j2", "scripts", figures=Markup(json_for_script(figs)), plotly_b64=plotly_b64(),
                  js=Markup(_our_js()))

