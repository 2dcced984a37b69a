"""GHBUILD_* variables over the config file: which variable sets which key, and its value parsed as that key's type."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

from ghbuild.config import schema
from ghbuild.config.options import parse_bool
from ghbuild.errors import ConfigError

ENV_PREFIX = "GHBUILD_"

# Variables under these prefixes are settings: an unknown one is a typo, not something to ignore.
_SETTING_SECTIONS = ("TRUST", "REGISTRIES", "SCCACHE", "PUBLISH", "RUNNERS", "IMAGES", "CACHE")


# Build args are visible in `docker history`; names like these almost always mean a secret.
_SECRET_NAME_RE = re.compile(
    r"(?i)(secret|passw|credential|private_key|access_key|api_key|(^|_)token($|_))")


def _env_segment(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def _leaf_paths(node: dict[str, Any], root: dict[str, Any], prefix: tuple[str, ...]):
    """(path, schema) for every overridable leaf below a schema node, following local $refs."""
    node = _deref(node, root)
    props = node.get("properties")
    if node.get("type") == "object" and props:
        for key, sub in props.items():
            yield from _leaf_paths(sub, root, (*prefix, key))
    else:
        yield prefix, node


def _deref(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while True:
        if "$ref" in node:
            node = _resolve(node["$ref"], root)
        elif "allOf" in node and len(node["allOf"]) == 1:
            merged = dict(_deref(node["allOf"][0], root))
            merged.update({k: v for k, v in node.items() if k != "allOf"})
            node = merged
        else:
            return node


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    node: Any = root
    for part in ref.removeprefix("#/").split("/"):
        node = node[part]
    return node


def env_mapping(image_names: list[str]) -> dict[str, tuple[tuple[str, ...], dict[str, Any]]]:
    """GHBUILD_* variable name -> (key path, leaf schema), for the images configured.

    The rule: GHBUILD_ + the key path joined by `_`, upper-cased, `-` as `_`; e.g.
    sccache.key-prefix -> GHBUILD_SCCACHE_KEY_PREFIX, images.cpu.runners.arm64 ->
    GHBUILD_IMAGES_CPU_RUNNERS_ARM64.
    """
    root = schema.document()
    mapping: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {}
    for key, sub in root["properties"].items():
        if key == "images":
            image_schema = sub["additionalProperties"]
            for name in image_names:
                for path, leaf in _leaf_paths(image_schema, root, ("images", name)):
                    _add(mapping, path, leaf)
        else:
            for path, leaf in _leaf_paths(sub, root, (key,)):
                _add(mapping, path, leaf)
    return mapping


def _add(mapping: dict, path: tuple[str, ...], leaf: dict[str, Any]) -> None:
    var = ENV_PREFIX + "_".join(_env_segment(p) for p in path)
    if var in mapping and mapping[var][0] != path:
        other = ".".join(mapping[var][0])
        raise ConfigError(f"{var} would set both {other} and {'.'.join(path)}: rename one of the images")
    mapping[var] = (path, leaf)


def _parse_env_value(var: str, text: str, leaf: dict[str, Any]) -> Any:
    kind = leaf.get("type")
    if kind == "boolean":
        try:
            return parse_bool(text)
        except ValueError as exc:
            raise ConfigError(f"{var}: {text!r}: {exc}") from None
    if kind == "integer":
        try:
            return int(text.strip())
        except ValueError:
            raise ConfigError(f"{var}: {text!r} is not an integer") from None
    if kind == "number":
        try:
            return float(text.strip())
        except ValueError:
            raise ConfigError(f"{var}: {text!r} is not a number") from None
    if kind == "array":
        if text.lstrip().startswith("["):
            return _json(var, text)
        return [item.strip() for item in re.split(r"[,\n]", text) if item.strip()]
    if kind == "object":
        if text.lstrip().startswith("{"):
            return _json(var, text)
        result = {}
        for item in re.split(r"[,\n]", text):
            if not item.strip():
                continue
            key, sep, value = item.partition("=")
            if not sep:
                raise ConfigError(f"{var}: expected KEY=VALUE items separated by commas, got {item.strip()!r}")
            result[key.strip()] = value.strip()
        return result
    # Text settings come from YAML often enough that a stray newline must not change their meaning.
    return text.strip()


def _json(var: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{var}: invalid JSON: {exc.msg}") from None


def apply_env(data: dict[str, Any], env: Mapping[str, str], sources: dict[str, str]) -> dict[str, Any]:
    """A copy of `data` with GHBUILD_* overrides applied; records each override in `sources`."""
    data = copy.deepcopy(data)
    images = data.get("images")
    names = list(images) if isinstance(images, dict) else []
    mapping = env_mapping(names)
    for var in sorted(env):
        if not var.startswith(ENV_PREFIX):
            continue
        if var not in mapping:
            section = var[len(ENV_PREFIX):].split("_", 1)[0]
            if section in _SETTING_SECTIONS:
                import difflib  # only for a mistyped variable

                hint = difflib.get_close_matches(var, list(mapping), n=1)
                extra = f" (did you mean {hint[0]}?)" if hint else ""
                raise ConfigError(f"{var}: unknown setting{extra}")
            continue
        path, leaf = mapping[var]
        value = _parse_env_value(var, env[var], leaf)
        node = data
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        if leaf.get("type") == "object" and isinstance(node.get(path[-1]), dict) and isinstance(value, dict):
            node[path[-1]] = {**node[path[-1]], **value}  # build args: override per key
        else:
            node[path[-1]] = value
        sources[".".join(path)] = var
    return data
