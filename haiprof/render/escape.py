"""How text from the run enters the report's HTML: Jinja2 templates (templates/*.html.j2) with autoescape, so every
value is escaped by the engine, never by hand. A leaf module, so that every panel can import it without importing
the page that lists the panels."""
from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path

import jinja2
from markupsafe import Markup

TEMPLATES = Path(__file__).parent / "templates"
COMPILED = TEMPLATES / "__pycache__"


class _CompiledTemplates(jinja2.FileSystemBytecodeCache):
    """The compiled templates kept beside them, as Python keeps its .pyc files: compiling the page's templates took
    ~0.1 s of every report. Jinja recompiles a template whose source changed (its checksum is in the file); the
    file name holds Jinja's version and this module's text, so other settings never reuse old code. A cache that
    cannot be read or written (a read-only install) is no cache, never a failed report."""

    def __init__(self, directory: Path = COMPILED):
        key = hashlib.sha1(jinja2.__version__.encode() + Path(__file__).read_bytes()).hexdigest()[:16]
        super().__init__(str(directory), f"{key}-%s.cache")

    def load_bytecode(self, bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except Exception:   # a damaged file (pickle/marshal errors): compile the template again
            bucket.reset()

    def dump_bytecode(self, bucket) -> None:
        try:
            os.makedirs(self.directory, exist_ok=True)
            super().dump_bytecode(bucket)   # written to a temporary file, then renamed: readers never see half
        except OSError:
            pass


@functools.lru_cache(maxsize=1)
def env() -> jinja2.Environment:
    """One environment per process: it caches the compiled templates (in memory, and on disk for later runs)."""
    return make_env(COMPILED)


def make_env(compiled: Path) -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), bytecode_cache=_CompiledTemplates(compiled),
                              autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
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
