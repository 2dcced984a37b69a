"""Read the stage structure of a Dockerfile: names, and what each stage is built FROM."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

_FROM_RE = re.compile(r"^\s*FROM\s+(?:--platform=\S+\s+)?(?P<base>\S+)(?:\s+AS\s+(?P<name>\S+))?\s*$", re.I)


# Instructions that add no entry to the image history. Everything else adds one, empty or not;
# BuildKit records a stage's ARG too (an empty `ARG NAME=value` entry).
_NO_HISTORY = {"from", "onbuild"}
_FROM_REF_RE = re.compile(r"(?:--from=|--mount=\S*?(?<=[=,])from=)([^\s,]+)")
# A variable in a FROM line: $NAME or ${NAME}, with a ${NAME:-default}-style modifier or without.
_VARIABLE_RE = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_]\w*)(?P<modifier>:?[-+][^}]*)?\}|(?P<bare>[A-Za-z_]\w*))")
_ARG_NAME_RE = re.compile(r"(?:^|\s)([A-Za-z_]\w*)(?==|\s|$)")
# BuildKit's automatic platform ARGs: in the global scope, so FROM may use them without a declaration.
AUTOMATIC_ARGS = frozenset({"TARGETPLATFORM", "TARGETOS", "TARGETARCH", "TARGETVARIANT", "TARGETOSVERSION",
                            "TARGETSTAGE", "BUILDPLATFORM", "BUILDOS", "BUILDARCH", "BUILDVARIANT",
                            "BUILDOSVERSION"})


class Stage(NamedTuple):
    number: int        # its position in the Dockerfile, from 0 (what `--from=N` names)
    name: str | None
    base: str          # a previous stage's name, or an image reference (ARGs not expanded)
    history_entries: int = 0   # how many image-history entries the stage's own instructions add
    uses: tuple[str, ...] = ()  # stages or images named by COPY --from= / RUN --mount=...,from=
    text: str = ""             # the stage's instructions, one logical line each, comments dropped

    @property
    def label(self) -> str:
        return self.name or f"stage-{self.number}"


# A heredoc in RUN, COPY or ADD (also after ONBUILD): an unquoted word `<<EOF`, `<<-EOF`, `<< "EOF"`, `2<<EOF`;
# the lines up to its delimiter are its body. Never in an exec-form (JSON) instruction.
HEREDOC_RE = re.compile(r"(?:^|(?<=\s))\d*<<(?!<)(-?)\s*([\"']?)([^\s\"'<>|&;()]+)\2")
_HEREDOC_INSTRUCTIONS = {"run", "copy", "add"}
# BuildKit's parser directives; any other line ends them (a comment, an empty line, an instruction).
_DIRECTIVE_RE = re.compile(r"^#\s*(syntax|escape|check)\s*=\s*(.*?)\s*$", re.I)


def escape_character(text: str) -> str:
    """The `# escape=` parser directive's character (a backslash or a backtick), from the directives at the top."""
    for raw in text.removeprefix("\ufeff").splitlines():
        match = _DIRECTIVE_RE.match(raw.strip())
        if not match:
            break
        if match.group(1).lower() == "escape" and match.group(2) in ("\\", "`"):
            return match.group(2)
    return "\\"


def outside_quotes(text: str) -> list[bool]:
    """For each character of a shell text, whether it stands outside '...' and "..." (the quotes themselves are
    inside; a backslash outside single quotes escapes the next character)."""
    out, quote, escaped = [], "", False
    for char in text:
        if escaped:
            out.append(not quote)
            escaped = False
            continue
        if char == "\\" and quote != "'":
            escaped = True
            out.append(not quote)
        elif quote:
            out.append(False)
            quote = "" if char == quote else quote
        elif char in "'\"":
            out.append(False)
            quote = char
        else:
            out.append(True)
    return out


def heredocs(instruction: str) -> list[tuple[bool, str]]:
    """(tabs stripped, delimiter) of each heredoc an instruction opens, in order; [] for other instructions."""
    words = instruction.split()
    keyword = words[1].lower() if len(words) > 1 and words[0].lower() == "onbuild" else words[0].lower()
    command = re.sub(r"^\s*(?:onbuild\s+)?\w+\s+(?:--\S+\s+)*", "", instruction, flags=re.I)
    if keyword not in _HEREDOC_INSTRUCTIONS or command.startswith("["):
        return []
    unquoted = outside_quotes(instruction)
    return [(bool(m.group(1)), m.group(3)) for m in HEREDOC_RE.finditer(instruction) if unquoted[m.start()]]


def instructions(text: str) -> Iterator[tuple[int, int, str]]:
    """(first line, last line, instruction) per instruction: 0-based physical lines, continuations joined.
    Comment and empty lines are dropped, also inside a continued instruction (as BuildKit does). A heredoc's
    body is the instruction's, verbatim after a newline (its last line is the delimiter's), never an
    instruction of its own; a heredoc whose delimiter never comes is no heredoc (BuildKit refuses the file).
    A leading UTF-8 BOM is dropped and the escape directive honoured, as BuildKit does."""
    lines = text.removeprefix("\ufeff").splitlines()
    escape = escape_character(text)
    buffer, first, number = "", None, 0   # first: the line the instruction being joined began on
    while number < len(lines):
        raw = lines[number]
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            number += 1
            continue
        first = number if first is None else first
        if raw.rstrip().endswith(escape):
            buffer += raw.rstrip()[:-1] + " "
            number += 1
            continue
        instruction, end = buffer + raw, number
        for strip_tabs, delimiter in heredocs(instruction):
            close = next((n for n in range(end + 1, len(lines))
                          if (lines[n].lstrip("\t") if strip_tabs else lines[n]) == delimiter), None)
            if close is None:
                break
            end = close
        # The body, verbatim, is the instruction's: what it runs or writes (a base's identity hashes it).
        instruction += "".join("\n" + line for line in lines[number + 1:end + 1])
        yield first, end, instruction
        buffer, first, number = "", None, end + 1
    if buffer and first is not None:   # a continuation at the end of the file (buffer implies first)
        yield first, len(lines) - 1, buffer


def _logical_lines(text: str) -> Iterator[str]:
    for _, _, line in instructions(text):
        yield line


def stages(path: Path) -> list[Stage]:
    return parse(path)[1]


def parse(path: Path) -> tuple[str, list[Stage]]:
    """The global preamble (ARGs before the first FROM, which FROM lines may use) and the stages. A backtick
    escape directive heads the preamble: it changes what the same text does (a base's identity hashes it)."""
    text = path.read_text("utf-8")
    preamble: list[str] = ["# escape=`\n"] if escape_character(text) == "`" else []
    result: list[Stage] = []
    for line in _logical_lines(text):
        match = _FROM_RE.match(line)
        if match:
            result.append(Stage(number=len(result), name=(match.group("name") or "").lower() or None,
                                base=match.group("base"), text=line.strip() + "\n"))
            continue
        if not result:
            preamble.append(line.strip() + "\n")
            continue
        last = result[-1]
        word = line.split(None, 1)[0].lower() if line.strip() else ""
        counts = bool(word) and word not in _NO_HISTORY
        # as written: an image ref may hold ${ARG}s whose names are case-sensitive; stage names match lower-cased
        uses = tuple(dict.fromkeys(last.uses + tuple(_FROM_REF_RE.findall(line))))
        result[-1] = last._replace(history_entries=last.history_entries + counts, uses=uses,
                             text=last.text + line.strip() + "\n")
    return "".join(preamble), result


def undeclared_from_args(text: str) -> list[tuple[int, str, str]]:
    """(1-based line, FROM line, variable) for each variable a FROM line's image uses that no ARG before the first FROM
    declares: FROM sees only those (an ARG inside a stage is that stage's alone), so BuildKit would expand it to
    nothing and fail with "base name should not be blank" or an invalid reference. A ``${NAME:-default}``-style
    use and BuildKit's automatic platform ARGs are fine."""
    declared, found, seen_from = set(AUTOMATIC_ARGS), [], False
    for first, _, line in instructions(text):
        keyword, *rest = line.split(None, 1)
        word = keyword.lower()
        if word == "arg" and not seen_from:
            declared.update(_ARG_NAME_RE.findall("".join(rest)))
        elif word == "from":
            seen_from = True
            base = _FROM_RE.match(line)    # the image only: an empty --platform= is the default platform
            for match in _VARIABLE_RE.finditer(base.group("base") if base else ""):
                name = match.group("braced") or match.group("bare")
                if not match.group("modifier") and name not in declared:
                    found.append((first + 1, " ".join(line.split()), name))
    return found


def parent(stage: Stage, all_stages: list[Stage]) -> Stage | None:
    """The stage this one is built FROM, or None for an external image."""
    for other in all_stages[: stage.number]:
        if other.name and other.name == stage.base.lower():
            return other
    return None


def chain(target: str | None, all_stages: list[Stage]) -> list[Stage]:
    """The FROM chain of the target stage, oldest first (the last stage when target is None)."""
    if not all_stages:
        return []
    current = all_stages[-1] if target is None else next((s for s in all_stages if s.name == target.lower()), None)
    if current is None:
        return []
    out = [current]
    while (up := parent(current, all_stages)) is not None:
        out.append(up)
        current = up
    return list(reversed(out))


def dependencies(target: str | None, all_stages: list[Stage]) -> set[str]:
    """Labels of every stage that building the target builds (FROM chains and --from uses)."""
    by_name = {s.name: s for s in all_stages if s.name}
    by_index = {str(s.number): s for s in all_stages}
    todo = [s for s in chain(target, all_stages)[-1:]]
    seen: set[str] = set()
    while todo:
        stage = todo.pop()
        if stage.label in seen:
            continue
        seen.add(stage.label)
        up = parent(stage, all_stages)
        if up is not None:
            todo.append(up)
        for ref in stage.uses:
            other = by_name.get(ref.lower()) or by_index.get(ref)
            if other is not None and other.number < stage.number:
                todo.append(other)
    return seen
