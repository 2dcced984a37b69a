"""``python -m infra.doc_tables [--check] [--root DIR] [FILE ...]``: the documentation's generated tables.

A table sits between two marker comments that name what it is generated from::

    <!-- BEGIN interface:.github/workflows/build-images.yml -->
    ...
    <!-- END interface:.github/workflows/build-images.yml -->

Kinds: ``inputs``, ``outputs``, ``secrets`` (one table each) or ``interface`` (all three in one table, a first
column saying which) of a composite or JavaScript action (``.github/actions/*/action.yml``) or of a reusable
workflow (``.github/workflows/*.yml`` with ``on: workflow_call``); ``exit-codes`` of ``ghbuild/errors.py``.
Without ``--check`` every table is rewritten from its file; with it nothing is written and the exit code is 1
when a table differs from what its file says, naming each one. Files default to README.md, CONTRIBUTING.md and
docs/*.md.

Development tooling: the YAML is read with ruamel.yaml (the test extra; YAML 1.2, as GitHub reads it, so
``on:`` stays a string key), imported here only, so ``python -m infra up`` keeps to the standard library.
``ghbuild/errors.py`` is loaded by its path, not imported as part of the ghbuild package.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("interface", "inputs", "outputs", "secrets", "exit-codes")
MARKER = re.compile(r"^<!-- (BEGIN|END) ([a-z-]+):(\S+) -->$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


class DocTableError(Exception):
    """A marker that cannot be generated: unknown kind, missing file, not an action or reusable workflow."""


def doc_files(root: Path = ROOT) -> list[Path]:
    """The documentation files that may hold generated tables."""
    files = [root / "README.md", root / "CONTRIBUTING.md", *sorted((root / "docs").glob("*.md"))]
    return [path for path in files if path.is_file()]


def load_yaml(path: Path) -> dict[str, Any]:
    from ruamel.yaml import YAML  # the test extra; only this tool needs it

    data = YAML(typ="safe", pure=True).load(path.read_text("utf-8"))
    return data if isinstance(data, dict) else {}


def interface(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """inputs, outputs and secrets of an action.yml or of a workflow's `on: workflow_call`."""
    data = load_yaml(path)
    if path.name in ("action.yml", "action.yaml"):
        section = data
        if "runs" not in data:
            raise DocTableError(f"{path}: not an action (no `runs:`)")
    else:
        on = data.get("on")
        if not isinstance(on, dict) or "workflow_call" not in on:
            raise DocTableError(f"{path}: not a reusable workflow (no `on: workflow_call`)")
        section = on["workflow_call"] or {}
    return {kind: {str(name): (spec or {}) for name, spec in (section.get(kind) or {}).items()}
            for kind in ("inputs", "outputs", "secrets")}


def cell(text: object) -> str:
    """Markdown table cell text: one line, pipes escaped, `<` escaped outside code spans (GitHub would take
    `<owner>` for an HTML tag and drop it)."""
    flat = " ".join(str(text).split())
    parts, last = [], 0
    for match in CODE_SPAN.finditer(flat):
        parts.append(flat[last:match.start()].replace("<", "&lt;"))
        parts.append(match.group(0))
        last = match.end()
    parts.append(flat[last:].replace("<", "&lt;"))
    return "".join(parts).replace("|", r"\|")


def code(value: str) -> str:
    fence = "``" if "`" in value else "`"
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def default_cell(kind: str, spec: dict[str, Any]) -> str:
    """An input's default (or `required`), with a workflow input's type; empty for outputs and secrets."""
    if kind == "outputs":
        return ""
    if spec.get("required") is True:
        text = "required"
    elif kind == "secrets" or "default" not in spec:
        text = ""
    else:
        value = spec["default"]
        text = code(str(value).lower() if isinstance(value, bool) else str(value)) if value != "" else '`""`'
    kind_of = spec.get("type")
    if kind_of:
        text = f"{text} ({kind_of})" if text else str(kind_of)
    return text


def interface_rows(parts: dict[str, dict[str, dict[str, Any]]], kinds: Iterable[str], with_kind: bool) -> list[str]:
    label = {"inputs": "input", "outputs": "output", "secrets": "secret"}
    rows = []
    for kind in kinds:
        for name, spec in parts[kind].items():
            cells = [code(name), cell(default_cell(kind, spec)), cell(spec.get("description", ""))]
            if with_kind:
                cells.insert(0, label[kind])
            rows.append("| " + " | ".join(cells) + " |")
    return rows


def interface_table(kind: str, path: Path) -> list[str]:
    parts = interface(path)
    if kind == "interface":
        return ["| | name | default | description |", "|---|---|---|---|",
                *interface_rows(parts, ("inputs", "outputs", "secrets"), with_kind=True)]
    header = {"inputs": "| input | default | description |", "outputs": "| output | | description |",
              "secrets": "| secret | | description |"}[kind]
    return [header, "|---|---|---|", *interface_rows(parts, (kind,), with_kind=False)]


def exit_codes(path: Path) -> list[tuple[int, str, str]]:
    """`exit_codes()` of ghbuild/errors.py, loaded by path (it imports nothing of ghbuild)."""
    spec = importlib.util.spec_from_file_location("_ghbuild_errors_for_docs", path)
    if spec is None or spec.loader is None:
        raise DocTableError(f"{path}: cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.exit_codes())


def exit_code_table(path: Path) -> list[str]:
    return ["| code | kind | when |", "|---|---|---|",
            *(f"| {code_} | {cell(kind)} | {cell(meaning)} |" for code_, kind, meaning in exit_codes(path))]


def table(kind: str, source: str, root: Path = ROOT) -> list[str]:
    """The table a marker `kind:source` stands for, as lines."""
    if kind not in KINDS:
        raise DocTableError(f"unknown table kind {kind!r} (one of {', '.join(KINDS)})")
    path = root / source
    if not path.is_file():
        raise DocTableError(f"{source}: no such file")
    return exit_code_table(path) if kind == "exit-codes" else interface_table(kind, path)


def blocks(text: str) -> Iterator[tuple[str, str, int, int]]:
    """(kind, source, first line, end line) of every marked table; the lines between are the table."""
    lines = text.split("\n")
    open_at: tuple[str, str, int] | None = None
    for number, line in enumerate(lines):
        match = MARKER.match(line.strip())
        if not match:
            continue
        edge, kind, source = match.groups()
        if edge == "BEGIN":
            if open_at:
                raise DocTableError(f"line {number + 1}: BEGIN {kind}:{source} inside {open_at[0]}:{open_at[1]}")
            open_at = (kind, source, number)
        else:
            if not open_at or (open_at[0], open_at[1]) != (kind, source):
                raise DocTableError(f"line {number + 1}: END {kind}:{source} without its BEGIN")
            yield kind, source, open_at[2] + 1, number
            open_at = None
    if open_at:
        raise DocTableError(f"line {open_at[2] + 1}: BEGIN {open_at[0]}:{open_at[1]} without its END")


def regenerate(text: str, root: Path = ROOT) -> tuple[str, list[str]]:
    """The text with every marked table generated again, and the markers (`kind:source`) whose table changed."""
    lines = text.split("\n")
    stale: list[str] = []
    for kind, source, start, end in reversed(list(blocks(text))):
        fresh = table(kind, source, root)
        if lines[start:end] != fresh:
            stale.append(f"{kind}:{source}")
            lines[start:end] = fresh
    return "\n".join(lines), stale[::-1]


def markers(text: str) -> list[tuple[str, str]]:
    return [(kind, source) for kind, source, _, _ in blocks(text)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.doc_tables", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming every stale table")
    parser.add_argument("--root", type=Path, default=ROOT, help="the repository the sources are read from "
                        "(default: the one this file is in)")
    parser.add_argument("files", nargs="*", type=Path, help="default: README.md, CONTRIBUTING.md, docs/*.md")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    files = args.files or doc_files(root)
    stale_total = 0
    for path in files:
        shown = path.resolve().relative_to(root) if path.resolve().is_relative_to(root) else path
        try:
            text = path.read_text("utf-8")
            new, stale = regenerate(text, root)
        except (OSError, DocTableError) as exc:
            print(f"doc_tables: {shown}: {exc}", file=sys.stderr)
            return 2
        stale_total += len(stale)
        for name in stale:
            verb = "stale table" if args.check else "regenerated"
            print(f"doc_tables: {shown}: {verb} {name}", file=sys.stderr if args.check else sys.stdout)
        if stale and not args.check:
            path.write_text(new, "utf-8")
    if args.check and stale_total:
        print("doc_tables: run `python -m infra.doc_tables` to regenerate", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
