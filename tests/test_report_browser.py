"""report.html in a real headless Chromium: no console errors, no network, verdict shown, charts drawn,
run-supplied text inert."""
import json
import shutil

import pytest

from conftest import SCRIPTS, artifact, load_summary, run_haiprof

MAX_REPORT_BYTES = 1_000_000    # issue 21: plotly.js inlined and still light enough to mail or attach
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    # Per module, not per session: Playwright's sync API marks an asyncio loop as running in this thread while it
    # is open, which later modules' code (asyncio.run, nbclient) must not inherit.
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "chromium is required for the report tests (make test installs Debian's chromium)"
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        yield b
        b.close()


def open_report(browser, path):
    page = browser.new_page()
    problems, requests = [], []
    page.on("console", lambda m: problems.append(f"console.{m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    page.wait_for_function("window.haiprofChartsDone === true", timeout=30_000)   # plotly inflated, charts drawn
    return page, problems, requests


def _tick_x(page, fig) -> dict:
    """x pixel (page coordinates) of each x-axis tick of a drawn plotly chart, by plotly's own data-to-pixel map
    (a label's box can be nudged off its tick at the plot's edge)."""
    return page.evaluate("""fig => {
        const el = document.getElementById('fig-' + fig), xa = el._fullLayout.xaxis;
        const left = el.querySelector('.main-svg').getBoundingClientRect().left, out = {};
        for (const t of xa._vals || []) out[t.text] = left + xa._offset + xa.l2p(t.x);
        return out;
    }""", fig)


def legend(page, fig) -> dict:
    """legend label -> swatch colour as the browser computed it (plotly's legend)."""
    out = {}
    for item in page.locator(f"#fig-{fig} .legend .traces").all():
        swatch = item.locator(".legendpoints path").first
        out[item.locator(".legendtext").text_content().strip()] = swatch.evaluate("e => getComputedStyle(e).fill")
    return out


def assert_lined_up(page, fig, other):
    """The same step label sits at the same pixel on both charts."""
    a, b = _tick_x(page, fig), _tick_x(page, other)
    shared = [k for k in a if k in b]
    assert len(shared) >= 2, (a, b)
    assert all(abs(a[k] - b[k]) <= 1.0 for k in shared), (a, b)


def test_report_renders_offline(browser, example_run):
    out, r = example_run("input_bound.py")   # conftest.example_run, shared with the verdict tests
    assert r.returncode == 0, r.stderr
    s = load_summary(out)
    page, problems, requests = open_report(browser, out / "report.html")
    assert problems == []
    assert requests == [(out / "report.html").as_uri()]  # nothing but the file itself: no CDN, no fetch
    assert page.locator("#headline").inner_text() == s["headline"]
    assert "Input-bound" in s["headline"]
    # every chart drawn by plotly.js: bars for the step chart, lines for the timelines
    for fig in ("share", "steps", "cpu", "cpu-host", "mem", "io"):
        assert page.locator(f"#fig-{fig} .main-svg").count() >= 1, fig
    assert page.locator("#fig-steps .bars path").count() >= 10
    assert page.locator("#fig-cpu .scatterlayer .js-line").count() >= 1
    # plotly.js's cartesian bundle: a heatmap trace is there for the job page's ranks x steps chart
    assert page.evaluate("typeof Plotly.newPlot === 'function' && 'heatmap' in Plotly.PlotSchema.get().traces")
    # every trace hovers with its unit; the charts follow the window's width (plotly's responsive config)
    figs = json.loads(page.locator("#haiprof-figures").text_content())
    assert all(" ms" in t["hovertemplate"] for t in figs["steps"]["data"])
    assert all("% of one core" in t["hovertemplate"] for t in figs["cpu"]["data"])
    wide = page.locator("#fig-cpu .main-svg").first.bounding_box()["width"]
    page.set_viewport_size({"width": 700, "height": page.viewport_size["height"]})
    page.wait_for_function("document.querySelector('#fig-cpu .main-svg').getBoundingClientRect().width < 700")
    assert page.locator("#fig-cpu .main-svg").first.bounding_box()["width"] < wide
    assert_lined_up(page, "steps", "cpu")   # still step for step after the redraw
    page.set_viewport_size({"width": 1280, "height": 720})
    page.wait_for_function(f"document.querySelector('#fig-cpu .main-svg').getBoundingClientRect().width >= {wide}")
    heights = page.evaluate("Array.from(document.querySelectorAll('.chart .main-svg'), e => e.getBoundingClientRect().height)")
    assert min(heights) >= 150, heights   # a resize keeps each chart's height (no chart collapses onto the next)
    # utilization is drawn against the steps, lined up with the step chart: the same step label sits at the
    # same pixel on both (a seconds axis cannot be lined up with steps)
    assert_lined_up(page, "steps", "cpu")
    # the action comes first: "do this next" names the fix command, above the fold of a laptop screen
    assert "haiprof run --fix prefetch" in page.locator("#next").inner_text()
    box = page.locator("#next").bounding_box()
    assert box["y"] + box["height"] <= page.viewport_size["height"], box
    assert page.locator("#toc a").count() >= 4
    page.screenshot(path=artifact("report-cpu.png"), full_page=True)
    assert (out / "report.html").stat().st_size <= MAX_REPORT_BYTES
    page.close()


def test_script_text_stays_inert(browser, tmp_path):
    evil_dir = tmp_path / "<script>window.__pwned=1<!--"
    evil_dir.mkdir()
    script = evil_dir / "t<img src=x onerror=window.__pwned=2>.py"
    script.write_text((SCRIPTS / "seeded_train.py").read_text())
    out = tmp_path / "r"
    r = run_haiprof("run", "--quiet", "--out", out, script, "</script><script>window.__pwned=3</script>")
    assert r.returncode == 0, r.stderr
    page, problems, requests = open_report(browser, out / "report.html")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert problems == []
    assert all(u.startswith("file://") for u in requests)
    body = page.locator("body").inner_text()
    assert "</script><script>window.__pwned=3</script>" in body  # shown as text, not run
    assert page.locator("img").count() == 0
    page.close()
