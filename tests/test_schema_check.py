"""The quick schema check accepts a config only where jsonschema finds no error.

A valid config is not validated with jsonschema (its import costs ~0.1 s at every start); anything the quick
check does not accept goes through jsonschema, which words the error. So the quick check must never accept
what jsonschema rejects; and it should accept what jsonschema accepts, or the fast path is never taken.
Both are checked on ghbuild's own config and on thousands of seeded random mutations of it.
"""

from __future__ import annotations

import copy
import random
import tomllib
from pathlib import Path

import pytest

from ghbuild.config import schema, schema_check, validation

ROOT = Path(__file__).resolve().parents[1]


def _base_config() -> dict:
    data = tomllib.loads((ROOT / "ghbuild.toml").read_text())
    data["build"] = {"builder": "b", "builder-network": "host", "network": "host", "provenance": False,
                     "base-image": "docker.io/library/debian:12"}
    data["runners"] = {"amd64": ["ubuntu-24.04"], "arm64": ["ubuntu-24.04-arm"]}
    data["images"]["rocm-base"]["identity"]["prefix"] = "rb"
    return data


def _schema_property_names(node, found: set[str]) -> set[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                found.update(value)
            _schema_property_names(value, found)
    elif isinstance(node, list):
        for item in node:
            _schema_property_names(item, found)
    return found


_VALUES = ["", "x", "cpu", "Bad Name", "a\n", "-a", "linux/amd64", "linux/s390x", "400MB", "huge", "1.5GB", "0",
           "max", "min", "ghcr.io/{owner}/ci-{image}", "UPPER/x", "http://127.0.0.1:9", 0, -1, 1, 14, 2.5, 1.0,
           True, False, [], ["a"], ["a", "a"], ["linux/amd64", "linux/arm64"], ["x y"], [1], [True, 1], {},
           {"a": "b"}, {"amd64": ["l"]}, {"A": 1}, {"": "x"}]


def _near(old, rng: random.Random):
    """A value close to `old`, at the edges its schema draws (empty, duplicated, a newline, out of range)."""
    if isinstance(old, str):
        return rng.choice(["", old + "\n", old.upper(), " " + old, old + ",x", old * 2])
    if isinstance(old, list):
        return rng.choice([[], old + old[:1], old[:1], [*old, ""], [*old, 1]])
    if isinstance(old, bool):
        return rng.choice(["true", 1, not old])
    if isinstance(old, int):
        return rng.choice([-1, 0, old + 1, float(old), str(old)])
    return rng.choice([{}, {"x": old}, []])


def _containers(node, path=()):
    """(path, container) for every dict and list in the config."""
    if isinstance(node, (dict, list)):
        yield path, node
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            yield from _containers(value, (*path, key))


def _mutate(data: dict, rng: random.Random, names: list[str]) -> dict:
    data = copy.deepcopy(data)
    for _ in range(rng.randint(1, 3)):
        _path, node = rng.choice(list(_containers(data)))
        value = copy.deepcopy(rng.choice(_VALUES))
        if isinstance(node, list):
            if node and rng.random() < 0.5:
                node[rng.randrange(len(node))] = value
            else:
                node.append(value)
            continue
        action = rng.random()
        if node and action < 0.25:
            del node[rng.choice(list(node))]
        elif node and action < 0.45:
            node[rng.choice(list(node))] = value
        elif node and action < 0.6:
            key = rng.choice(list(node))
            node[key] = _near(node[key], rng)
        elif node and action < 0.7:
            old = rng.choice(list(node))
            node[rng.choice(["Bad Name", "-x", "ok-name", old.upper(), old + "s"])] = node.pop(old)
        else:
            node[rng.choice(names)] = value
    return data


def _jsonschema_valid(data) -> bool:
    return not any(True for _ in validation._validator_class()(schema.document()).iter_errors(data))


def _has_float(node) -> bool:
    if isinstance(node, float):
        return True
    if isinstance(node, dict):
        return any(_has_float(v) for v in node.values())
    return isinstance(node, list) and any(_has_float(v) for v in node)


def test_the_schema_uses_only_keywords_the_quick_check_decides():
    known = schema_check.known_keywords()

    def walk(node, where):
        if isinstance(node, bool):
            return
        assert isinstance(node, dict), where
        unknown = set(node) - known
        assert not unknown, f"{where}: {sorted(unknown)} (every config would be validated with jsonschema)"
        for key, value in node.items():
            if key in ("properties", "$defs"):
                for name, sub in value.items():
                    walk(sub, f"{where}/{key}/{name}")
            elif key in ("allOf", "anyOf"):
                for i, sub in enumerate(value):
                    walk(sub, f"{where}/{key}/{i}")
            elif key in ("items", "additionalProperties", "propertyNames"):
                walk(value, f"{where}/{key}")

    walk(schema.document(), "#")


def test_own_config_passes_the_quick_check():
    assert schema_check.surely_valid(_base_config(), schema.document())
    assert _jsonschema_valid(_base_config())


@pytest.mark.parametrize("seed", range(4))
def test_quick_check_agrees_with_jsonschema_on_mutated_configs(seed):
    rng = random.Random(seed)
    names = sorted(_schema_property_names(schema.document(), set()))
    base = _base_config()
    verdicts = {True: 0, False: 0}
    for _ in range(500):
        data = _mutate(base, rng, names)
        quick, full = schema_check.surely_valid(data, schema.document()), _jsonschema_valid(data)
        # Never accept what jsonschema rejects (that would let a bad config through without its error).
        assert not (quick and not full), data
        # Accept what jsonschema accepts; a float anywhere may be left to jsonschema (1.0 is an integer there).
        if full and not _has_float(data):
            assert quick, data
        verdicts[full] += 1
    assert verdicts[True] > 20 and verdicts[False] > 200, verdicts


@pytest.mark.parametrize("value", ["a\n", "cpu\n"])
def test_a_trailing_newline_fails_a_pattern_as_in_ecma_262(value):
    data = _base_config()
    data["images"][value] = data["images"].pop("cpu")
    assert not schema_check.surely_valid(data, schema.document())
    assert not _jsonschema_valid(data)


def test_values_json_has_no_type_for_are_left_to_jsonschema():
    import datetime

    data = _base_config()
    data["publish"]["nightly-tag"] = datetime.date(2026, 1, 1)   # a TOML date
    assert not schema_check.surely_valid(data, schema.document())
    assert not _jsonschema_valid(data)
