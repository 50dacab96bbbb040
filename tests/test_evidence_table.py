"""Evidence reads as a table of facts with units and three significant digits, never a JSON dump."""
from haiprof.render import evidence as E


def test_values_take_their_unit_from_the_key():
    ev = {"dataloader_share": 0.123456, "steady_step_s": 0.0296512, "pageable_us": 5.5, "peak_bytes": 3 * 2**30,
          "read_bytes_per_s_mean": 5 * 2**20, "steps": 294, "kernel_density": 0.0612,
          "thresholds": {"moderate": 0.05, "high": 0.2}, "loader_mode": "2 worker(s)", "traced": None,
          "ok": True, "counts": [1, 2, 3], "long": list(range(100)), "wait_ns": 2_500_000}
    rows = dict(E.rows(ev))
    assert rows["dataloader share"] == "12.3%"
    assert rows["steady step s"] == "29.7 ms"
    assert rows["pageable us"] == "5.5 µs"
    assert rows["peak bytes"] == "3 GiB"
    assert rows["read bytes per s mean"] == "5 MiB/s"
    assert rows["steps"] == "294" and rows["kernel density"] == "6.12%"
    assert rows["thresholds · moderate"] == "5%" and rows["thresholds · high"] == "20%"
    assert rows["loader mode"] == "2 worker(s)" and rows["traced"] == "n/a" and rows["ok"] == "yes"
    assert rows["counts"] == "1, 2, 3" and rows["long"] == "100 values (in summary.json)"
    assert rows["wait ns"] == "2.5 ms"


def test_the_table_is_escaped_html():
    html = E.table({"name": "<script>alert(1)</script>"})
    assert "<script>" not in html and "&lt;script&gt;" in html and html.startswith('<table class="kv evidence">')
