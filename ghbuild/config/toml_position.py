"""Where a key is written in a TOML file: (line, column), 1-based, for annotations on the offending line.

tomllib keeps no positions, and neither does tomlkit's document model (it round-trips text but exposes
no line numbers), so this reads the text itself: table headers (`[a.b]`, `[[a]]`) set the current table,
`key = value` lines (bare, quoted and dotted keys) name a key in it, and inline tables name the keys
inside them on their line. Multi-line strings and arrays are skipped. A key it cannot place is answered
with its nearest located parent, so an error in `build-args = { X = 1 }` lands on that line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

Position = tuple[int, int]

_BARE = r"[A-Za-z0-9_-]+"
_KEY_PART = rf"(?:{_BARE}|\"(?:[^\"\\]|\\.)*\"|'[^']*')"
_DOTTED = rf"{_KEY_PART}(?:\s*\.\s*{_KEY_PART})*"
_HEADER = re.compile(rf"^(\s*)(\[\[?)\s*({_DOTTED})\s*\]\]?")
_ASSIGN = re.compile(rf"(\s*)({_DOTTED})\s*=")
_PART = re.compile(_KEY_PART)


def _parts(dotted: str) -> tuple[str, ...]:
    parts = []
    for match in _PART.finditer(dotted):
        text = match.group(0)
        if text[0] == '"':
            text = text[1:-1].encode("utf-8").decode("unicode_escape") if "\\" in text else text[1:-1]
        elif text[0] == "'":
            text = text[1:-1]
        parts.append(text)
    return tuple(parts)


def _inline(text: str, start: int, table: tuple[str, ...], line_no: int,
            found: dict[tuple[str, ...], tuple[int, int]]) -> None:
    """The keys of an inline table `{ a = 1, b = { c = 2 } }` that starts at text[start] == '{'."""
    stack = [table]
    pos = start + 1
    while pos < len(text) and stack:
        char = text[pos]
        if char == "}":
            stack.pop()
            pos += 1
            continue
        if char in "\"'":   # a string value: skip it
            end = text.find(char, pos + 1)
            while end > 0 and char == '"' and text[end - 1] == "\\":
                end = text.find(char, end + 1)
            pos = len(text) if end < 0 else end + 1
            continue
        match = _ASSIGN.match(text, pos) if char not in ",[]" else None
        if match and (pos == start + 1 or text[pos - 1] in "{, \t"):
            key = stack[-1] + _parts(match.group(2))
            found.setdefault(key, (line_no, match.start(2) + 1))
            pos = match.end()
            rest = text[pos:].lstrip()
            if rest.startswith("{"):
                stack.append(key)
                pos = len(text) - len(rest) + 1
            continue
        pos += 1


def locate_all(text: str, prefix: Sequence[str] = ()) -> dict[tuple[str, ...], Position]:
    """Every key path written in `text` -> (line, column) of its first occurrence; paths below `prefix`
    (e.g. ("tool", "ghbuild") in pyproject.toml) are returned without it."""
    found: dict[tuple[str, ...], Position] = {}
    table: tuple[str, ...] = ()
    open_quote: str | None = None   # inside a multi-line string
    depth = 0                       # inside a multi-line array
    for line_no, line in enumerate(text.splitlines(), start=1):
        if open_quote:
            if line.count(open_quote) % 2:
                open_quote = None
            continue
        if depth:
            depth = max(0, depth + line.count("[") - line.count("]"))
            continue
        header = _HEADER.match(line)
        if header:
            table = _parts(header.group(3))
            found.setdefault(table, (line_no, header.start(3) + 1))
            continue
        assign = _ASSIGN.match(line)
        if not assign or line.lstrip().startswith("#"):
            continue
        key = table + _parts(assign.group(2))
        for end in range(len(table) + 1, len(key) + 1):   # `runners.arm64 = ...` also writes `runners`
            found.setdefault(key[:end], (line_no, assign.start(2) + 1))
        value = line[assign.end():].lstrip()
        start = len(line) - len(value)
        for quote in ('"""', "'''"):
            if value.startswith(quote) and value.count(quote) == 1:
                open_quote = quote
        if value.startswith("{"):
            _inline(line, start, key, line_no, found)
        elif value.startswith("["):
            depth = max(0, value.count("[") - value.count("]"))
    prefix = tuple(prefix)
    return {k[len(prefix):]: v for k, v in found.items() if k[:len(prefix)] == prefix and len(k) > len(prefix)}


def locate(text: str, path: Sequence[str], prefix: Sequence[str] = ()) -> Position | None:
    """(line, column) of the key `path`, else of its nearest written parent; None if none is written."""
    found = locate_all(text, prefix)
    path = tuple(path)
    while path:
        if path in found:
            return found[path]
        path = path[:-1]
    return None
