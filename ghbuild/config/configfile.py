"""Load the configuration: find the file, apply GHBUILD_* overrides, validate, build `Options`.

Precedence: defaults < ghbuild.toml (or [tool.ghbuild] in pyproject.toml) < GHBUILD_* variables.
Every validation error names where the value came from (file and key, or the variable).
"""

from __future__ import annotations

import copy
import json
import os
import re
import tomllib
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from ghbuild import naming
from ghbuild.build import sccache
from ghbuild.config import schema_check
from ghbuild.config.options import (
    ARCHES,
    DEFAULT_ARCH_SUFFIXES,
    DEFAULT_RUNNERS,
    DEFAULT_SCCACHE_HELPER_IMAGE,
    BuildOptions,
    IdentityOptions,
    ImageOptions,
    Options,
    PublishOptions,
    RegistryOptions,
    SccacheOptions,
    TrustOptions,
    parse_size,
)
from ghbuild.errors import ConfigError, InvalidReferenceError

ENV_PREFIX = "GHBUILD_"
CONFIG_ENV = "GHBUILD_CONFIG"
CONFIG_FILE = "ghbuild.toml"
# Variables under these prefixes are settings: an unknown one is a typo, not something to ignore.
_SETTING_SECTIONS = ("TRUST", "REGISTRIES", "SCCACHE", "PUBLISH", "RUNNERS", "IMAGES")
_PLACEHOLDER_RE = re.compile(r"\{([^{}]*)\}")
_PLACEHOLDERS = ("image", "owner")
# Build args are visible in `docker history`; names like these almost always mean a secret.
_SECRET_NAME_RE = re.compile(
    r"(?i)(secret|passw|credential|private_key|access_key|api_key|(^|_)token($|_))")


@lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The JSON schema of the config file (also printed by `ghbuild schema`)."""
    # A file next to this module (ghbuild is never imported from a zip): importlib.resources would import
    # zipfile and its readers (~30 ms) at every start of a command that loads a config.
    text = (Path(__file__).resolve().parents[1] / "resources" / "ghbuild.schema.json").read_text("utf-8")
    return json.loads(text)


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

def _env_segment(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def _leaf_paths(node: dict[str, Any], root: dict[str, Any], prefix: tuple[str, ...]):
    """(path, schema) for every overridable leaf below a schema node, following local $refs."""
    node = _deref(node, root)
    props = node.get("properties")
    if node.get("type") == "object" and props:
        for key, sub in props.items():
            yield from _leaf_paths(sub, root, prefix + (key,))
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
    root = schema()
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
            return sccache.parse_bool(text)
        except ValueError as exc:
            raise ConfigError(f"{var}: {text!r}: {exc}") from None
    if kind == "integer":
        try:
            return int(text.strip())
        except ValueError:
            raise ConfigError(f"{var}: {text!r} is not an integer") from None
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
                import difflib

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


# --------------------------------------------------------------------------- validation

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
        from ghbuild.config import toml_position

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
    if schema_check.surely_valid(data, schema()):
        return
    validator = _validator_class()(schema())
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
        key = _dotted(path + [unknown[0]]) if unknown else _dotted(path)
        import difflib

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
    defs = schema()["$defs"]
    for name, expected in _EXPECTED.items():
        if error.schema == defs[name]:
            return f"{shown} is not {expected}"
    if error.validator == "type":
        kinds = error.validator_value if isinstance(error.validator_value, list) else [error.validator_value]
        return f"{shown} is not {' or '.join(_TYPE_WORDS.get(k, k) for k in kinds)}"
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


def load(explicit: str | None = None, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Options:
    """Find, read, override and validate the configuration."""
    import os

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


def _build(data: dict[str, Any], path: Path, sources: dict[str, str], where: _Where) -> Options:
    top_runners = data.get("runners", {})
    runners_default = {a: tuple(top_runners.get(a, DEFAULT_RUNNERS[a])) for a in ARCHES}

    reg = data.get("registries", {})
    registries = RegistryOptions(
        cache=reg.get("cache") or None,
        staging=reg.get("staging") or None,
        publish=reg.get("publish") or None,
        gha_cache=reg.get("gha-cache", True),
        cache_mode=reg.get("cache-mode", "max"),
    )

    images: dict[str, ImageOptions] = {}
    for name, img in data["images"].items():
        build_args = dict(img.get("build-args", {}))
        for arg in build_args:
            if _SECRET_NAME_RE.search(arg):
                raise where.error(f"images.{name}.build-args.{arg}", "looks like a secret; build args stay in "
                                  "the image history, pass secrets as BuildKit secrets instead")
        img_runners = img.get("runners", {})
        try:
            size_budget = parse_size(img["size-budget"]) if "size-budget" in img else None
        except ValueError as exc:
            raise where.error(f"images.{name}.size-budget", str(exc)) from None
        stage_budgets = {}
        for stage, budget in img.get("stage-budgets", {}).items():
            try:
                stage_budgets[stage] = parse_size(budget)
            except ValueError as exc:
                raise where.error(f"images.{name}.stage-budgets.{stage}", str(exc)) from None
        images[name] = ImageOptions(
            name=name,
            dockerfile=img["dockerfile"],
            context=img.get("context", "."),
            target=img.get("target") or None,
            build_args=build_args,
            platforms=tuple(img.get("platforms", ["linux/amd64"])),
            runners={a: tuple(img_runners.get(a, runners_default[a])) for a in ARCHES},
            staging=img.get("staging") or None,
            publish=img.get("publish") or None,
            base_image=img.get("base-image") or None,
            size_budget=size_budget,
            stage_budgets=stage_budgets,
            identity=_identity(name, img.get("identity")),
            base=img.get("base") or None,
        )
    _check_bases(images, where)
    _check_paths(images, path.parent, where)

    sc = data.get("sccache", {})
    endpoint = sc.get("endpoint", "")
    try:
        sccache.check_endpoint(endpoint)
    except ValueError as exc:
        raise where.error("sccache.endpoint", str(exc)) from None
    sccache_options = SccacheOptions(
        enabled=sc.get("enabled", True),
        bucket=sc.get("bucket") or None,
        region=sc.get("region") or None,
        endpoint=endpoint or None,
        key_prefix=sc.get("key-prefix", "sccache"),
        helper_image=_helper_image(sc, where),
    )

    tr = data.get("trust", {})
    canonical = tr.get("canonical-repository") or None
    if canonical:
        try:
            canonical = naming.normalize_slug(canonical)
        except InvalidReferenceError as exc:
            raise where.error("trust.canonical-repository", str(exc)) from None
    trust = TrustOptions(canonical_repository=canonical, stable_branch=tr.get("stable-branch") or None,
                         self_hosted_for_forks=tr.get("self-hosted-for-forks", False),
                         hosted_runner_labels=tuple(tr.get("hosted-runner-labels", ())))

    pub = data.get("publish", {})
    publish = PublishOptions(
        nightly_tag=pub.get("nightly-tag", "nightly"),
        arch_suffixes={**DEFAULT_ARCH_SUFFIXES, **pub.get("arch-suffixes", {})},
        retention=pub.get("retention", 14),
    )
    if publish.arch_suffixes["amd64"] == publish.arch_suffixes["arm64"]:
        raise where.error("publish.arch-suffixes", "amd64 and arm64 need different suffixes")

    bl = data.get("build", {})
    build = BuildOptions(builder=bl.get("builder") or None, builder_network=bl.get("builder-network", "host"),
                         network=bl.get("network", "host"), provenance=bl.get("provenance", False),
                         base_image=bl.get("base-image") or None)

    options = Options(config_path=path, images=images, registries=registries, build=build, sccache=sccache_options,
                      trust=trust, publish=publish, sources=sources)
    _check_repositories(options, where)
    return options


def _helper_image(sc: dict[str, Any], where) -> str:
    """An image reference with a tag or a digest (ghbuild pins a tag to its digest before each build)."""
    ref = sc.get("helper-image") or DEFAULT_SCCACHE_HELPER_IMAGE
    name, at, digest = ref.partition("@")
    slash, colon = name.rfind("/"), name.rfind(":")
    try:
        if at:
            if not naming.is_digest_ref(ref):
                raise InvalidReferenceError(f"{ref!r} is not name@sha256:<64 hex>")
        else:
            naming.validate_repository(name[:colon] if colon > slash else name, "image")
            naming.validate_tag(name[colon + 1:] if colon > slash else "latest")
    except InvalidReferenceError as exc:
        raise ConfigError(f"{where('sccache.helper-image')}: {exc}") from None
    return ref


def repository_root(folder: Path) -> Path:
    """The git work tree holding `folder` (the nearest parent with a .git entry), else `folder` itself."""
    folder = folder.resolve()
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return folder


def _inside(root: Path, project: Path, value: str) -> str | None:
    """Why `value` (relative to the config's folder; a glob is read literally) leads out of `root`; None when
    it stays inside."""
    if value.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", value):
        return "an absolute path"
    lexical = Path(os.path.normpath(project / value))
    if lexical != root and root not in lexical.parents:
        return "'..' leads out of the repository"
    # Follow symlinks as far as the path exists (a link inside the tree may point anywhere); for a glob,
    # as far as its literal part: what it matches lies below that.
    literal = Path(os.path.normpath(project / re.sub(r"[*?\[].*", "", value)))
    real, real_root = Path(os.path.realpath(literal)), Path(os.path.realpath(root))
    if real != real_root and real_root not in real.parents:
        return "a symlink leads out of the repository"
    return None


def _check_paths(images: dict[str, ImageOptions], project: Path, where: _Where) -> None:
    """Every configured path stays inside the repository: a branch's config must not send the runner's
    home (a docker login's config.json, say) into a build context, or build from a file outside."""
    root = repository_root(project)
    kind = "git repository" if (root / ".git").exists() else "project folder"
    for name, image in images.items():
        checks = [("dockerfile", image.dockerfile), ("context", image.context)]
        checks += [(f"identity.inputs[{i}]", pattern)
                   for i, pattern in enumerate(image.identity.inputs if image.identity else ())]
        for key, value in checks:
            why = _inside(root, project.resolve(), value)
            if why:
                raise where.error(f"images.{name}.{key}", f"{value!r} is outside the {kind} "
                                  f"({why}; paths are relative to the config file's folder and stay inside "
                                  f"{root})")


def _identity(name: str, data: dict[str, Any] | None) -> IdentityOptions | None:
    if data is None:
        return None
    return IdentityOptions(version=data["version"], inputs=tuple(data.get("inputs", ())),
                           prefix=data.get("prefix") or name)


def _check_bases(images: dict[str, ImageOptions], where: _Where) -> None:
    """`base` names a content-addressed image built for every platform of the image using it."""
    for image in images.values():
        if not image.base:
            continue
        key = f"images.{image.name}.base"
        base = images.get(image.base)
        if base is None:
            raise where.error(key, f"no image named {image.base!r} (known: {', '.join(images)})")
        if base.identity is None:
            raise where.error(key, f"image {image.base!r} has no [images.{image.base}.identity] "
                              "table, so it has no content address to hand over by digest")
        if base.base:
            raise where.error(key, f"image {image.base!r} itself builds on {base.base!r}; "
                              "chains of content-addressed bases are not supported")
        missing = [p for p in image.platforms if p not in base.platforms]
        if missing:
            raise where.error(key, f"{image.base!r} is not built for {', '.join(missing)}")
        if image.base_image:
            raise where.error(f"images.{image.name}.base-image", "set either base-image or base, "
                              "not both")


def _check_repositories(options: Options, where: _Where) -> None:
    """Every repository template must expand to a valid name, and images must not share one."""
    for role in ("cache", "staging", "publish"):
        template = getattr(options.registries, role)
        if template:
            _check_template(template, f"registries.{role}", where)
    for role in ("staging", "publish"):
        seen: dict[str, str] = {}
        for image in options.images.values():
            own = getattr(image, role)
            key = f"images.{image.name}.{role}" if own else f"registries.{role}"
            template = own or getattr(options.registries, role)
            if not template:
                continue
            if own:
                _check_template(own, key, where)
            resolved = expand_repository(template, image.name, "owner")
            if resolved in seen:
                raise where.error(key, f"images {seen[resolved]} and {image.name} would share the {role} "
                                       f"repository {resolved}; add {{image}} to the name or give each image its own")
            seen[resolved] = image.name


def _check_template(template: str, key: str, where: _Where) -> None:
    for placeholder in _PLACEHOLDER_RE.findall(template):
        if placeholder not in _PLACEHOLDERS:
            raise where.error(key, f"unknown placeholder {{{placeholder}}} (known: {{image}}, {{owner}})")
    try:
        naming.validate_repository(expand_repository(template, "image", "owner"), where="")
    except InvalidReferenceError as exc:
        raise where.error(key, str(exc)) from None


def expand_repository(template: str, image: str, owner: str) -> str:
    """Fill {image} and {owner} (lower-cased: registries take lower-case paths only)."""
    return template.replace("{image}", image).replace("{owner}", owner.lower())
