"""A quick yes to "does this config pass the schema?", so that a valid config does not import jsonschema.

`surely_valid(data, schema)` answers True only when jsonschema (Draft 2020-12, with config.py's `pattern`)
would report no error. It knows the keywords the config schema uses, each with jsonschema's own semantics;
on anything else (a keyword it does not know, a float where an integer is asked for, a value of a type JSON
does not have, such as a TOML date) it answers False, as it does for an invalid config. False only means
"ask jsonschema": the caller then validates with jsonschema, which finds and words the errors (or none).
So the quick path can make validation no weaker and no different, only skip it when nothing is wrong.
Importing this module costs nothing beyond `re`.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

# JSON Schema patterns are ECMA-262 regexes, whose `$` matches only at the very end of the text;
# Python's `$` also matches before a final newline, so "runtime\n" (a YAML block scalar in a
# GHBUILD_* variable) would pass `^[A-Za-z0-9][A-Za-z0-9_.-]*$`. Validate with `\Z` instead.
_PATTERN_END = re.compile(r"(?<!\\)\$")
# Keywords that never make an instance invalid.
_ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "$comment", "title", "description", "default", "examples"})
# Python types of the values jsonschema's type checker names the same way on every path here.
_PLAIN = (dict, list, str, bool, int, float, type(None))


class _Unsure(Exception):
    """The quick check cannot decide; jsonschema must."""


@cache
def compiled_pattern(pattern: str) -> re.Pattern[str]:
    """A schema `pattern` as a Python regex with ECMA-262's meaning of `$` (the very end)."""
    return re.compile(_PATTERN_END.sub(r"\\Z", pattern))


def surely_valid(instance: Any, schema: dict[str, Any]) -> bool:
    """True when `instance` is valid against `schema`; False when it is not, or when only jsonschema can tell."""
    try:
        return _valid(instance, schema, schema)
    except _Unsure:
        return False


def known_keywords() -> frozenset[str]:
    """Every schema keyword the quick check decides (annotations included)."""
    return frozenset(_KEYWORDS) | _ANNOTATIONS


def _valid(instance: Any, node: Any, root: dict[str, Any]) -> bool:
    if node is True:
        return True
    if node is False:
        return False
    if not isinstance(node, dict) or type(instance) not in _PLAIN:
        raise _Unsure
    for keyword, value in node.items():
        if keyword in _ANNOTATIONS:
            continue
        check = _KEYWORDS.get(keyword)
        if check is None:
            raise _Unsure
        if not check(instance, value, node, root):
            return False
    return True


def _is_type(instance: Any, kind: str) -> bool:
    if kind == "object":
        return isinstance(instance, dict)
    if kind == "array":
        return isinstance(instance, list)
    if kind == "string":
        return isinstance(instance, str)
    if kind == "boolean":
        return isinstance(instance, bool)
    if kind == "null":
        return instance is None
    if kind == "number":
        return isinstance(instance, (int, float)) and not isinstance(instance, bool)
    if kind == "integer":
        if isinstance(instance, float):
            raise _Unsure    # Draft 2020-12 counts 1.0 as an integer: leave that to jsonschema
        return isinstance(instance, int) and not isinstance(instance, bool)
    raise _Unsure


def _type(instance: Any, value: Any, node: Any, root: Any) -> bool:
    kinds = value if isinstance(value, list) else [value]
    return any(_is_type(instance, kind) for kind in kinds)


def _ref(instance: Any, value: Any, node: Any, root: Any) -> bool:
    if not isinstance(value, str) or not value.startswith("#/") or "~" in value or "%" in value:
        raise _Unsure
    target: Any = root
    for part in value[2:].split("/"):
        if not isinstance(target, dict) or part not in target:
            raise _Unsure
        target = target[part]
    return _valid(instance, target, root)


def _properties(instance: Any, value: Any, node: Any, root: Any) -> bool:
    if not isinstance(instance, dict):
        return True
    return all(_valid(instance[key], sub, root) for key, sub in value.items() if key in instance)


def _additional_properties(instance: Any, value: Any, node: Any, root: Any) -> bool:
    if not isinstance(instance, dict):
        return True
    if "patternProperties" in node:
        raise _Unsure
    known = node.get("properties", {})
    return all(_valid(item, value, root) for key, item in instance.items() if key not in known)


def _required(instance: Any, value: Any, node: Any, root: Any) -> bool:
    return not isinstance(instance, dict) or all(key in instance for key in value)


def _property_names(instance: Any, value: Any, node: Any, root: Any) -> bool:
    return not isinstance(instance, dict) or all(_valid(key, value, root) for key in instance)


def _min_properties(instance: Any, value: Any, node: Any, root: Any) -> bool:
    return not isinstance(instance, dict) or len(instance) >= value


def _items(instance: Any, value: Any, node: Any, root: Any) -> bool:
    if not isinstance(instance, list):
        return True
    if "prefixItems" in node:
        raise _Unsure
    return all(_valid(item, value, root) for item in instance)


def _min_items(instance: Any, value: Any, node: Any, root: Any) -> bool:
    return not isinstance(instance, list) or len(instance) >= value


def _unique_items(instance: Any, value: Any, node: Any, root: Any) -> bool:
    if not value or not isinstance(instance, list):
        return True
    if not all(isinstance(item, str) for item in instance):
        raise _Unsure    # jsonschema's equality (1 != True, [1] == [1.0]...) is not Python's
    return len(set(instance)) == len(instance)


def _min_length(instance: Any, value: Any, node: Any, root: Any) -> bool:
    return not isinstance(instance, str) or len(instance) >= value


def _pattern(instance: Any, value: Any, node: Any, root: Any) -> bool:
    return not isinstance(instance, str) or compiled_pattern(value).search(instance) is not None


def _enum(instance: Any, value: Any, node: Any, root: Any) -> bool:
    if not all(isinstance(each, str) for each in value):
        raise _Unsure
    return isinstance(instance, str) and instance in value


def _minimum(instance: Any, value: Any, node: Any, root: Any) -> bool:
    if not _is_type(instance, "number"):
        return True
    return not instance < value


def _maximum(instance: Any, value: Any, node: Any, root: Any) -> bool:
    if not _is_type(instance, "number"):
        return True
    return not instance > value


def _all_of(instance: Any, value: Any, node: Any, root: Any) -> bool:
    return all(_valid(instance, sub, root) for sub in value)


def _any_of(instance: Any, value: Any, node: Any, root: Any) -> bool:
    return any(_valid(instance, sub, root) for sub in value)


_KEYWORDS = {
    "$ref": _ref, "type": _type, "properties": _properties, "additionalProperties": _additional_properties,
    "required": _required, "propertyNames": _property_names, "minProperties": _min_properties, "items": _items,
    "minItems": _min_items, "uniqueItems": _unique_items, "minLength": _min_length, "pattern": _pattern,
    "enum": _enum, "minimum": _minimum, "maximum": _maximum, "allOf": _all_of, "anyOf": _any_of,
}
