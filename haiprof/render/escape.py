"""`esc`: every string that came from the run goes through it before it enters the report's HTML. A leaf module,
so that every panel can import it without importing the page that lists the panels."""
from __future__ import annotations

import html


def esc(x) -> str:
    return html.escape("" if x is None else str(x), quote=True)
