"""The report's compiled templates are kept on disk (render/escape.py), as Python keeps .pyc files: a later report
loads them instead of compiling, gets the same page, and a damaged or unwritable cache never fails a report."""
from __future__ import annotations

import jinja2
from jinja2.bccache import bc_magic

from haiprof.render import escape

ROWS = [("batch", "<32>"), ("loader", "4 workers")]
PAGE = ('<table class="kv evidence"><tr><td>batch</td><td>&lt;32&gt;</td></tr><tr><td>loader</td><td>4 workers</td>'
        '</tr></table>')


def _table(environment: jinja2.Environment) -> str:
    return str(environment.get_template("evidence.html.j2").module.table(rows=ROWS)).strip()


def _no_compile(monkeypatch) -> None:
    def refuse(self, *a, **k):
        raise AssertionError("compiled a template the cache holds")
    monkeypatch.setattr(jinja2.Environment, "compile", refuse)


def test_a_later_report_loads_the_compiled_template_and_renders_the_same(tmp_path, monkeypatch):
    assert _table(escape.make_env(tmp_path)) == PAGE
    assert len(list(tmp_path.glob("*.cache"))) == 1
    _no_compile(monkeypatch)
    assert _table(escape.make_env(tmp_path)) == PAGE


def test_a_damaged_cache_file_is_compiled_again(tmp_path, monkeypatch):
    _table(escape.make_env(tmp_path))
    (cached,) = tmp_path.glob("*.cache")
    data = cached.read_bytes()
    cached.write_bytes(data[: len(data) // 2])     # a file cut short (a full disk, a killed writer)
    assert _table(escape.make_env(tmp_path)) == PAGE
    cached.write_bytes(bc_magic + b"\x00" * 40)    # the right header, then garbage
    assert _table(escape.make_env(tmp_path)) == PAGE
    _no_compile(monkeypatch)                      # and the rewritten file is whole again
    assert _table(escape.make_env(tmp_path)) == PAGE


def test_an_unwritable_cache_is_no_cache(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    assert _table(escape.make_env(blocker / "compiled")) == PAGE
    assert blocker.read_text() == "not a directory"


def test_other_settings_never_reuse_old_code(tmp_path, monkeypatch):
    """The file name holds Jinja's version and render/escape.py's text: another version of either compiles anew."""
    _table(escape.make_env(tmp_path))
    monkeypatch.setattr(jinja2, "__version__", jinja2.__version__ + ".other")
    _table(escape.make_env(tmp_path))
    assert len(list(tmp_path.glob("*.cache"))) == 2
