"""Load the configuration: find the file, apply GHBUILD_* overrides, validate, build `Options`.

Precedence: defaults < ghbuild.toml (or [tool.ghbuild] in pyproject.toml) < GHBUILD_* variables.
Every validation error names where the value came from (file and key, or the variable).
"""

from __future__ import annotations

import copy
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ghbuild.config.environment import ENV_PREFIX, apply_env
from ghbuild.config.options import (
    Options,
)
from ghbuild.config.typed import _build
from ghbuild.config.validation import _located, _schema_errors, _Where
from ghbuild.errors import ConfigError

CONFIG_ENV = "GHBUILD_CONFIG"
CONFIG_FILE = "ghbuild.toml"


# --------------------------------------------------------------------------- finding the file

def find_config(explicit: str | None, env: Mapping[str, str], cwd: Path) -> tuple[Path, dict[str, Any]]:
    """The config file and its ghbuild table. --config beats GHBUILD_CONFIG beats the defaults."""
    if explicit or env.get(CONFIG_ENV):
        source = "--config" if explicit else CONFIG_ENV
        path = Path(explicit or env[CONFIG_ENV])
        path = path if path.is_absolute() else cwd / path
        if not path.is_file():
            raise ConfigError(f"{source}: {path} does not exist or is not a file")
        return path, _read_table(path)
    toml_path = cwd / CONFIG_FILE
    if toml_path.is_file():
        return toml_path, _read_table(toml_path)
    pyproject = cwd / "pyproject.toml"
    if pyproject.is_file():
        data = _read_toml(pyproject)
        table = data.get("tool", {}).get("ghbuild") if isinstance(data.get("tool"), dict) else None
        if table is not None:
            if not isinstance(table, dict):
                raise ConfigError(f"{pyproject}: tool.ghbuild: must be a table")
            return pyproject, table
    raise ConfigError(
        f"no configuration: {CONFIG_FILE} not found in {cwd} and no [tool.ghbuild] in pyproject.toml "
        "(use --config PATH or GHBUILD_CONFIG)")


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    if raw.startswith((b"\xff\xfe", b"\xfe\xff", b"\xef\xbb\xbf")):
        bom = "UTF-8 with a byte-order mark" if raw.startswith(b"\xef") else "UTF-16"
        raise _located(path, f"{path}: {bom}; TOML files are UTF-8 without a byte-order mark (save it as UTF-8)",
                       line=1, col=1)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise _located(path, f"{path}: not UTF-8 text (byte {exc.start} at line {line}, column {col}); TOML "
                             "files are UTF-8 (save it as UTF-8)", line=line, col=col) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib has the position only in its message: "... (at line 3, column 7)"
        at = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        raise _located(path, f"{path}: invalid TOML: {exc}", line=int(at[1]) if at else None,
                       col=int(at[2]) if at else None) from None


def _read_table(path: Path) -> dict[str, Any]:
    data = _read_toml(path)
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("ghbuild")
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: no [tool.ghbuild] table")
        return table
    return data


# --------------------------------------------------------------------------- GHBUILD_* overrides


# --------------------------------------------------------------------------- validation


def load(explicit: str | None = None, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Options:
    """Find, read, override and validate the configuration."""
    env = os.environ if env is None else env
    cwd = cwd or Path.cwd()
    path, raw = find_config(explicit, env, cwd)
    return from_data(raw, path, env)


# Settings that would widen what a run may do. Inside GitHub Actions the checked-out config is the branch's
# (or the pull request's) own, so these come only from GHBUILD_* variables there: the caller workflow's
# `overrides` and repository variables. The rest may stay in the file: trust.canonical-repository can only
# narrow trust (every repository is its own canonical by default), and build.builder is taken by trusted runs
# only (whose checkout is the trusted branch's; docker_client.choose_builder).
CHECKOUT_IGNORED = ("trust.stable-branch", "trust.self-hosted-for-forks", "trust.hosted-runner-labels")


def _without_checkout_steering(raw: dict[str, Any], env: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """`raw` without the CHECKOUT_IGNORED keys when running inside GitHub Actions, and a notice per key left
    out that no variable sets anyway."""
    if env.get("GITHUB_ACTIONS") != "true":
        return raw, []
    data = copy.deepcopy(raw)
    notices: list[str] = []
    for key in CHECKOUT_IGNORED:
        section, leaf = key.split(".")
        table = data.get(section)
        if not isinstance(table, dict) or leaf not in table:
            continue
        del table[leaf]
        variable = ENV_PREFIX + key.upper().replace(".", "_").replace("-", "_")
        if variable not in env:
            notices.append(f"{key} in the config file ignored inside GitHub Actions (the checkout is the branch's "
                           f"own): set it with the caller workflow's overrides or {variable}")
    return data, notices


def from_data(raw: dict[str, Any], path: Path, env: Mapping[str, str]) -> Options:
    sources: dict[str, str] = {}
    raw, notices = _without_checkout_steering(raw, env)
    data = apply_env(raw, env, sources)
    where = _Where(path, sources)
    _schema_errors(data, where)
    return _build(data, path, sources, where)._replace(notices=tuple(notices))
