"""mkdocs hook: the Sphinx roles the package's docstrings use (``:class:`~sse_middleware.Blocked```,
``:func:`override```) reach the page as text, since mkdocstrings reads the docstrings' fields but not
inline roles. Each becomes its name in code, linked when the page has that object's anchor (the API
reference renders every public name under its full path). Private targets stay plain code."""

from __future__ import annotations

import re
from typing import Any

ROLE = re.compile(r":(?:class|func|meth|attr|mod|exc|data|obj):<code>(~?)([\w.]+)</code>")
PACKAGE = "sse_middleware"


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    anchors = set(re.findall(r'id="([\w.]+)"', html))

    def code(match: re.Match[str]) -> str:
        short, target = match.groups()
        shown = target.rsplit(".", 1)[-1] if short or target.startswith(".") else target
        full = target.lstrip(".~")
        full = full if full.startswith(PACKAGE) else f"{PACKAGE}.{full}"
        if full in anchors:
            return f'<a class="autorefs" href="#{full}"><code>{shown}</code></a>'
        return f"<code>{shown}</code>"

    return ROLE.sub(code, html)
