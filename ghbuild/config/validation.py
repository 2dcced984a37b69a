"""Config errors that say where: the file and key (with its line and column) or the variable that set it; the schema's
errors in words.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from ghbuild.config import schema, schema_check, toml_position
from ghbuild.errors import ConfigError


def _dotted(path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


class _Where:
    """Names the origin of a key: the variable that set it, else the file."""

    def __init__(self, config_path: Path, sources: Mapping[str, str]):
        self.config_path = config_path
        self.sources = sources

    def __call__(self, key: str) -> str:
        probe = key
        while probe:
            if probe in self.sources:
                return f"{self.sources[probe]} (overrides {key})"
            if probe.endswith("]"):  # an array item: images.cpu.platforms[1] -> images.cpu.platforms
                probe = probe[:probe.rindex("[")]
            else:
                probe = probe.rpartition(".")[0] if "." in probe else ""
        return f"{self.config_path}: {key}"

    def error(self, key: str, detail: str) -> ConfigError:
        """`<file>: <key>: <detail>` (or the variable that set it), located on the key's line in the file."""
        where = self(key)
        if where.startswith(f"{self.config_path}: "):
            return _located(self.config_path, detail=f"{where}: {detail}", key=key)
        return ConfigError(f"{where}: {detail}")


def _located(path: Path, detail: str, key: str | None = None, line: int | None = None,
             col: int | None = None) -> ConfigError:
    """A ConfigError carrying file, line and column: of `key` as written in `path`, or the ones given."""
    if key is not None:
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            text = ""
        prefix = ("tool", "ghbuild") if path.name == "pyproject.toml" else ()
        found = toml_position.locate_all(text, prefix)
        by_name = {".".join(k): v for k, v in found.items()}
        probe = key
        while probe and probe not in by_name:   # images.cpu.platforms[1] -> images.cpu.platforms -> ...
            probe = probe[:probe.rindex("[")] if probe.endswith("]") else probe.rpartition(".")[0]
        line, col = by_name.get(probe, (None, None))
    return ConfigError(detail, file=str(path), line=line, col=col)


@lru_cache(maxsize=1)
def _validator_class():
    from jsonschema import Draft202012Validator, ValidationError, validators  # lazy: only for a config with errors

    def pattern(validator, patrn, instance, subschema):
        if validator.is_type(instance, "string") and not schema_check.compiled_pattern(patrn).search(instance):
            yield ValidationError(f"{instance!r} does not match {patrn!r}")

    return validators.extend(Draft202012Validator, {"pattern": pattern})


def _schema_errors(data: dict[str, Any], where: _Where) -> None:
    # The quick check says yes only where jsonschema would find nothing: a valid config is not made to
    # import jsonschema (~0.1 s); every other one, and every error message, goes through jsonschema.
    if schema_check.surely_valid(data, schema.document()):
        return
    validator = _validator_class()(schema.document())
    # At one path, an unknown key comes first: it is usually a typo that also explains a missing one
    # (`dockerfle = ...` is reported as unknown, with the suggestion, not as "'dockerfile' is required").
    errors = sorted(validator.iter_errors(data), key=lambda e: (
        list(map(str, e.absolute_path)), e.validator != "additionalProperties", e.message))
    if not errors:
        return
    error = errors[0]
    path = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        unknown = sorted(k for k in error.instance if k not in allowed)
        key = _dotted([*path, unknown[0]]) if unknown else _dotted(path)
        hint = difflib.get_close_matches(unknown[0], sorted(allowed), n=1) if unknown else []
        extra = f" (did you mean {hint[0]!r}?)" if hint else ""
        raise where.error(key, f"unknown key{extra}")
    if error.validator == "required":
        raise where.error(_dotted(path), error.message)
    if error.validator == "propertyNames":
        name = error.instance if isinstance(error.instance, str) else ""
        bad = [k for k in (error.instance if isinstance(error.instance, dict) else []) if k]
        raise where.error(_dotted(path), f"invalid name {name or bad!r}: {error.message}")
    raise where.error(_dotted(path), _in_words(error))


# What a value of a shared definition looks like, for "'huge' is not a size such as 400MB".
_EXPECTED = {"size": "a size such as 400MB, 1.5GB or 200MiB (or a number of bytes)",
             "labels": 'a list of runner labels such as ["ubuntu-24.04"] (no spaces or commas in a label)',
             "runners": "a table of runner labels per architecture (amd64, arm64)",
             "repository": "an image repository such as ghcr.io/{owner}/ci-{image}",
             "build-args": 'a table of build arguments such as { VERSION = "1.2" }'}


_TYPE_WORDS = {"string": "text (a quoted string)", "integer": "a whole number", "number": "a number",
               "boolean": "true or false", "array": "a list [...]", "object": "a table"}


def _in_words(error) -> str:
    """A schema failure as a sentence about the value, not about the schema."""
    value = error.instance
    shown = repr(value) if not isinstance(value, (dict, list)) else ("a table" if isinstance(value, dict)
                                                                     else "a list")
    defs = schema.document()["$defs"]
    for name, expected in _EXPECTED.items():
        if error.schema == defs[name]:
            return f"{shown} is not {expected}"
    if error.validator == "type":
        kinds = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return f"{shown} is not {' or '.join(_TYPE_WORDS.get(k, str(k)) for k in kinds)}"
    if error.validator == "enum":
        return f"{shown} is not one of {', '.join(repr(v) for v in error.validator_value)}"
    if error.validator == "pattern":
        description = error.schema.get("description")
        return f"{shown} is not allowed here" + (f": {description}" if description else
                                                 f" (it must match {error.validator_value})")
    if error.validator in ("anyOf", "oneOf"):
        described = error.schema.get("description")
        return f"{shown} is not valid here" + (f": {described}" if described else "")
    return error.message
