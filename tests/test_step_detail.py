"""The step chart's data (render/step_detail.py, charts.step_chart) and the inlined plotly.js
(render/plotly_inline.py): buckets exact, the embedded detail the finest level within its budget and decodable as
the page decodes it, the bundle shipped as package data."""
import base64
import gzip
import tomllib
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO
from haiprof.render import charts, plotly_inline, step_detail

MS = 1_000_000


def _run(n, seed=0):
    rng = np.random.default_rng(seed)
    ph = {"forward": MS * (1 + 0.1 * rng.standard_normal(n)), "backward": 2 * MS * (1 + 0.1 * rng.standard_normal(n))}
    return np.arange(n) + 5, ph["forward"] + ph["backward"], ph


def _decode(z):
    """render/js/steps.js's decode, in numpy: (unit starts, counts, last steps, ms columns, shares)."""
    buf = np.frombuffer(gzip.decompress(base64.b64decode(z["b64"])), dtype=np.uint8)
    n, off, out = z["units"], 0, []

    def planes(width):
        nonlocal off
        p = buf[off:off + width * n].reshape(width, n).astype(np.float64)
        off += width * n
        return sum(p[b] * 256.0 ** b for b in range(width))

    start, count, span = np.cumsum(planes(4)), planes(4), planes(4)
    times = [np.where(c == 0, 0, 2 ** (c / z["R"]) / 1e6) for c in [planes(2) for _ in range(1 if z["k"] == 1 else 4)]]
    shares = [buf[off + i * n: off + (i + 1) * n] for i in range(len(z.get("phases", [])) or 2)]
    return start, count, start + span, times, shares


def test_buckets_are_exact():
    idx, dur, ph = _run(10)
    b = step_detail.buckets(idx, dur, ph, 4)
    assert b["first"].tolist() == [5, 9, 13] and b["last"].tolist() == [8, 12, 14] and b["count"].tolist() == [4, 4, 2]
    assert b["min"][0] == dur[:4].min() and b["max"][2] == dur[8:].max() and b["median"][1] == np.median(dur[4:8])
    assert b["phases"]["forward"][2] == pytest.approx(ph["forward"][8:].mean())


def test_detail_is_every_step_when_it_fits_and_decodes_within_its_precision():
    idx, dur, ph = _run(20_000)
    z = step_detail.encode(idx, dur, ph, 250_000)
    assert z["k"] == 1 and len(z["b64"]) <= 250_000
    start, count, last, (ms,), shares = _decode(z)
    assert start.tolist() == idx.tolist() and (count == 1).all() and (last == start).all()
    assert np.abs(ms / (dur / 1e6) - 1).max() <= 2 ** (0.5 / z["R"]) - 1 + 1e-9     # half a code: <= 0.55%
    assert np.abs(shares[0] / z["S"] - ph["forward"] / dur).max() <= 0.5 / z["S"] + 1e-9


def test_a_million_steps_fit_the_budget_in_groups():
    idx, dur, ph = _run(1_000_000)
    z = step_detail.encode(idx, dur, ph, 250_000)
    assert 1 < z["k"] <= 50 and len(z["b64"]) <= 250_000
    start, count, last, (mean, lo, med, hi), _ = _decode(z)
    assert count.sum() == 1_000_000 and start[0] == 5 and last[-1] == 1_000_004
    assert lo.min() == pytest.approx(dur.min() / 1e6, rel=0.005) and hi.max() == pytest.approx(dur.max() / 1e6, rel=0.005)


def test_step_chart_of_a_long_run_carries_the_detail_not_the_bars():
    idx, dur, ph = _run(5000)
    traced = np.zeros(5000, dtype=bool)
    traced[[100, 101, 102, 4000]] = True
    fig = charts.step_chart({"index": idx, "duration_ns": dur, "phases": ph, "traced": traced}, 3, ["forward", "backward"])
    assert fig["data"] == [] and fig["zoom"]["k"] == 1 and fig["layout"]["xaxis"]["rangeslider"]["visible"]
    assert fig["shading"] == {"warmup": [5, 7], "traced": [[105, 107], [4005, 4005]]}
    short = charts.step_chart({"index": idx[:50], "duration_ns": dur[:50], "phases": ph}, 3, ["forward", "backward"])
    assert "zoom" not in short and len(short["data"][0]["x"]) == 50 and "ms" in short["data"][0]["hovertemplate"]


def test_plotly_inlined_is_the_vendored_bundle_and_ships_as_package_data():
    raw = plotly_inline.BUNDLE.read_bytes()
    assert gzip.decompress(base64.b64decode(plotly_inline.plotly_b64())) == raw
    assert f"v{plotly_inline.PLOTLY_VERSION}" in raw[:200].decode() and (plotly_inline.BUNDLE.parent / "LICENSE").is_file()
    page = plotly_inline.scripts({"x": {"data": [], "layout": {"title": {"text": "</script><script>alert(1)"}}}})
    assert page.count("</script>") == 3 and "<script>alert" not in page
    # each data folder is a package of its own with its patterns (pyproject.toml; tests/test_packaging.py builds it)
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    here = Path(plotly_inline.__file__).parent
    shipped = {p for sub in ("vendor", "js") for g in data[f"haiprof.render.{sub}"] for p in (here / sub).glob(g)}
    assert {plotly_inline.BUNDLE, plotly_inline.BUNDLE_GZ, here / "vendor" / "LICENSE", here / "js" / "steps.js",
            here / "js" / "draw.js"} <= shipped
