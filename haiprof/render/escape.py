"""How text from the run enters the report's HTML: Jinja2 templates (templates/*.html.j2) with autoescape, so every
value is escaped by the engine; `esc` for the few strings still built by hand. A leaf module, so that every panel
can import it without importing the page that lists the panels."""
from __future__ import annotations

import functools
import json
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

TEMPLATES = Path(__file__).parent / "templates"


def esc(x) -> str:
    """The template engine's escaping (the same entities as the templates write)."""
    return str(escape("" if x is None else x))


@functools.lru_cache(maxsize=1)
def env() -> jinja2.Environment:
    """One environment per process: it caches the compiled templates."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                              finalize=lambda v: "" if v is None else v,   # as `esc`: None prints nothing
                              auto_reload=False)   # the templates ship with the package: never re-read


def macro(template: str, name: str):
    """A macro of a template file (one file per panel module, one macro per fragment); it returns Markup."""
    return getattr(env().get_template(template).module, name)


def render(template: str, name: str, **values) -> Markup:
    """The fragment `name` of `template` with `values` (escaped by the engine), surrounding whitespace dropped."""
    return macro(template, name)(**values).strip()


def json_for_script(obj) -> str:
    """JSON for a <script> block: "</script>" or "<!--" in a string would end the block, so escape <, >, &."""
    return (json.dumps(obj, separators=(",", ":"), default=str)
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
