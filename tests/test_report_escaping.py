"""Text from the run reaches report.html escaped by the template engine (issue 28, item 6): a script name and an
argument holding </script>, <script> and quotes read as text on the page, through the real `haiprof report`."""
import json
import shutil
from html.parser import HTMLParser

from conftest import REPO, run_haiprof

EVIL = '</script><script>window.__pwned=1</script>"onmouseover="window.__pwned=2'


class Page(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags, self.h1 = [], ""

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        if self.tags and self.tags[-1][0] == "h1":
            self.h1 += data


def test_a_script_name_with_markup_and_quotes_is_text_on_the_page(tmp_path):
    job = tmp_path / "job"
    shutil.copytree(REPO / "tests" / "data" / "ddp_rank200", job)
    meta = json.loads((job / "meta.json").read_text())
    script = f"{EVIL}.py"
    meta.update(target_name=EVIL, command=f"haiprof run {script} --tag {EVIL}", haiprof_argv=[script, "--tag", EVIL])
    (job / "meta.json").write_text(json.dumps(meta))
    r = run_haiprof("report", job)
    assert r.returncode == 0, r.stderr
    html = (job / "report.html").read_text(encoding="utf-8")
    page = Page()
    page.feed(html)
    scripts = [attrs.get("id") for tag, attrs in page.tags if tag == "script"]
    assert scripts == ["haiprof-figures", "haiprof-plotly", None]   # the page's own three, none from the run
    assert not [(tag, k) for tag, attrs in page.tags for k in attrs if k.startswith("on")]
    assert page.h1.strip() == f"haiprof: {EVIL}"   # shown as text, whole
    assert "&lt;/script&gt;&lt;script&gt;window.__pwned=1&lt;/script&gt;&#34;onmouseover=&#34;" in html
    assert html.count("<script") == 3 and html.count("</script>") == 3
