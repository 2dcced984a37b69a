"""Escaping for the job summary's Markdown.

Stage names, modes and stats come from inside a built image, refs from registries and build records,
names from event payloads, messages from tools on a runner: any of them may be written by the code
being built. Through `md` (text) or `code` (a code span) none can break a table, open HTML, link
somewhere or forge a heading.
"""

from __future__ import annotations

import html
import re

# Markdown that can act anywhere in a line: code spans, emphasis, links and images, table cells,
# strikethrough, escapes. `_` inside a word (x86_64) never emphasises in GitHub's Markdown.
_MD_SPECIAL = re.compile(r"([\\`*\[\]|~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")


_IN_HTML = frozenset("|`[]*_~\\")


def md(value: object) -> str:
    """Plain text for a Markdown table cell or list item: one line, HTML and Markdown syntax escaped."""
    text = _MD_SPECIAL.sub(r"\\\1", html.escape(" ".join(str(value).split()), quote=False))
    return "\\" + text if text[:1] in ("#", "-", "+", ">", "=") else text


def code(value: object) -> str:
    """A code span. Text with a backtick, a pipe or `<` becomes an HTML <code> with entities instead."""
    text = " ".join(str(value).split())
    if "`" not in text and "|" not in text and "<" not in text:
        return f"`{text}`"
    # Markdown still acts inside inline HTML: every character that could start it becomes an entity.
    return "<code>" + "".join(f"&#{ord(c)};" if c in _IN_HTML else c for c in html.escape(text)) + "</code>"
