"""`esc`: every string that came from the run goes through it before it enters the report's HTML. A leaf module,
so that every panel can import it without importing the page that lists the panels."""
from __future__ import annotations

import html
import json


def esc(x) -> str:
    return html.escape("" if x is None else str(x), quote=True)


def json_for_script(obj) -> str:
    """JSON for a <script> block: "</script>" or "<!--" in a string would end the block, so escape <, >, &."""
    return (json.dumps(obj, separators=(",", ":"), default=str)
            .replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
