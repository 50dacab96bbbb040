"""How text from the run enters the report's HTML: Jinja2 templates (templates/*.html.j2) with autoescape, so every
value is escaped by the engine, never by hand. A leaf module, so that every panel can import it without importing
the page that lists the panels."""
from __future__ import annotations

import functools
import json
from pathlib import Path

import jinja2
from markupsafe import Markup

TEMPLATES = Path(__file__).parent / "templates"


@functools.lru_cache(maxsize=1)
def env() -> jinja2.Environment:
    """One environment per process: it caches the compiled templates."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                              finalize=lambda v: "" if v is None else v,   # a missing value prints nothing
                              auto_reload=False)   # the templates ship with the package: never re-read


def render(template: str, name: str, **values) -> Markup:
    """The macro `name` of `template` (one file per panel module, one macro per fragment) with `values`, escaped by
    the engine; surrounding whitespace dropped."""
    return getattr(env().get_template(template).module, name)(**values).strip()


def json_for_script(obj) -> str:
    """JSON for a <script> block: "</script>" or "<!--" in a string would end the block, so escape <, >, &."""
    return (json.dumps(obj, separators=(",", ":"), default=str)
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
