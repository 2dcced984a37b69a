"""Configuration: finding the file, GHBUILD_* overrides, validation and the messages a user reads."""

from __future__ import annotations

import json
import textwrap
import tomllib
from pathlib import Path

import pytest

from ghbuild import naming
from ghbuild.config import configfile, environment, schema
from ghbuild.config.options import (
    DEFAULT_ARCH_SUFFIXES,
    DEFAULT_RUNNERS,
    PublishOptions,
    RegistryOptions,
    SccacheOptions,
)
from ghbuild.errors import ConfigError
from ghbuild.github import context
from ghbuild.plan import planner

REPO_ROOT = Path(__file__).resolve().parent.parent
SHA = "0123456789abcdef0123456789abcdef01234567"

MINIMAL = """
[images.cpu]
dockerfile = "Dockerfile"
"""

TWO_IMAGES = """
[registries]
cache = "ghcr.io/{owner}/cache"
staging = "ghcr.io/{owner}/ci-{image}"

[images.cpu]
dockerfile = "docker/Dockerfile.cpu"
platforms = ["linux/amd64", "linux/arm64"]
build-args = { PYTHON_VERSION = "3.12", CUDA = "no" }

[images.rocm]
dockerfile = "docker/Dockerfile.rocm"
runners.amd64 = ["self-hosted", "linux", "rocm"]
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load_text(tmp_path: Path, text: str, env: dict[str, str] | None = None):
    write(tmp_path / "ghbuild.toml", text)
    return configfile.load(None, env or {}, tmp_path)


def config_error(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text, env)
    message = str(info.value)
    assert "\n" not in message
    return message


def image_config(name: str) -> str:
    return f'[images.{name}]\ndockerfile = "Dockerfile"\n'


# --------------------------------------------------------------------------- discovery

def test_ghbuild_toml_in_the_working_directory(tmp_path):
    write(tmp_path / "ghbuild.toml", image_config("fromtoml"))
    options = configfile.load(None, {}, tmp_path)
    assert list(options.images) == ["fromtoml"]
    assert options.config_path == tmp_path / "ghbuild.toml"
    assert options.project_dir == tmp_path


def test_pyproject_tool_ghbuild_when_there_is_no_ghbuild_toml(tmp_path):
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n\n[tool.ghbuild.images.frompyproject]\n'
                                       'dockerfile = "Dockerfile"\n')
    options = configfile.load(None, {}, tmp_path)
    assert list(options.images) == ["frompyproject"]
    assert options.config_path == tmp_path / "pyproject.toml"


def test_ghbuild_toml_beats_pyproject(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.ghbuild.images.frompyproject]\ndockerfile = "D"\n')
    write(tmp_path / "ghbuild.toml", image_config("fromtoml"))
    assert list(configfile.load(None, {}, tmp_path).images) == ["fromtoml"]


def test_ghbuild_config_beats_ghbuild_toml(tmp_path):
    write(tmp_path / "ghbuild.toml", image_config("fromtoml"))
    write(tmp_path / "ci" / "other.toml", image_config("fromenv"))
    options = configfile.load(None, {"GHBUILD_CONFIG": "ci/other.toml"}, tmp_path)
    assert list(options.images) == ["fromenv"]
    assert options.config_path == tmp_path / "ci" / "other.toml"
    assert options.project_dir == tmp_path / "ci"  # relative paths are relative to the config file


def test_config_flag_beats_ghbuild_config(tmp_path):
    write(tmp_path / "ghbuild.toml", image_config("fromtoml"))
    write(tmp_path / "env.toml", image_config("fromenv"))
    write(tmp_path / "flag.toml", image_config("fromflag"))
    options = configfile.load("flag.toml", {"GHBUILD_CONFIG": "env.toml"}, tmp_path)
    assert list(options.images) == ["fromflag"]


def test_config_flag_accepts_an_absolute_path(tmp_path):
    target = write(tmp_path / "elsewhere" / "x.toml", image_config("abs"))
    assert list(configfile.load(str(target), {}, tmp_path / "nowhere").images) == ["abs"]


def test_config_flag_may_name_a_pyproject(tmp_path):
    write(tmp_path / "sub" / "pyproject.toml", '[tool.ghbuild.images.sub]\ndockerfile = "D"\n')
    assert list(configfile.load("sub/pyproject.toml", {}, tmp_path).images) == ["sub"]


def test_config_flag_naming_a_pyproject_without_the_table(tmp_path):
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n')
    with pytest.raises(ConfigError, match=r"pyproject.toml: no \[tool.ghbuild\] table"):
        configfile.load("pyproject.toml", {}, tmp_path)


def test_no_configuration_at_all(tmp_path):
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n')  # no [tool.ghbuild]
    with pytest.raises(ConfigError, match="no configuration") as info:
        configfile.load(None, {}, tmp_path)
    assert "--config" in str(info.value) and "GHBUILD_CONFIG" in str(info.value)


@pytest.mark.parametrize(("flag", "env", "named"), [
    ("missing.toml", {}, "--config"),
    (None, {"GHBUILD_CONFIG": "missing.toml"}, "GHBUILD_CONFIG"),
])
def test_explicit_file_that_does_not_exist(tmp_path, flag, env, named):
    write(tmp_path / "ghbuild.toml", MINIMAL)  # must not be used as a fallback
    with pytest.raises(ConfigError) as info:
        configfile.load(flag, env, tmp_path)
    assert str(info.value).startswith(f"{named}: ")
    assert "missing.toml" in str(info.value)


def test_invalid_toml_names_the_file_and_line(tmp_path):
    message = config_error(tmp_path, '[images.cpu]\ndockerfile = "unterminated\n')
    assert str(tmp_path / "ghbuild.toml") in message
    assert "invalid TOML" in message
    assert "line 2" in message


# --------------------------------------------------------------------------- defaults

def test_minimal_config_gets_the_documented_defaults(tmp_path):
    options = load_text(tmp_path, MINIMAL)
    cpu = options.images["cpu"]
    assert cpu.platforms == ("linux/amd64",)
    assert cpu.context == "."
    assert cpu.target is None
    assert dict(cpu.runners) == {"amd64": ("ubuntu-24.04",), "arm64": ("ubuntu-24.04-arm",)}
    assert options.registries == RegistryOptions()
    assert options.sccache == SccacheOptions()
    assert options.publish == PublishOptions()
    assert options.trust.canonical_repository is None and options.trust.stable_branch is None
    assert options.sources == {}


def test_schema_defaults_match_the_options_defaults():
    """`ghbuild schema` documents defaults for editors; they must be the ones ghbuild applies."""
    props = schema.document()["properties"]
    assert props["registries"]["properties"]["gha-cache"]["default"] == RegistryOptions().gha_cache
    assert props["registries"]["properties"]["cache-mode"]["default"] == RegistryOptions().cache_mode
    assert props["sccache"]["properties"]["enabled"]["default"] == SccacheOptions().enabled
    assert props["sccache"]["properties"]["key-prefix"]["default"] == SccacheOptions().key_prefix
    assert props["publish"]["properties"]["nightly-tag"]["default"] == PublishOptions().nightly_tag
    assert props["publish"]["properties"]["retention"]["default"] == PublishOptions().retention
    suffixes = props["publish"]["properties"]["arch-suffixes"]["properties"]
    assert {a: s["default"] for a, s in suffixes.items()} == dict(DEFAULT_ARCH_SUFFIXES)
    image = props["images"]["additionalProperties"]["properties"]
    assert image["platforms"]["default"] == ["linux/amd64"]
    assert image["context"]["default"] == "."
    assert "ubuntu-24.04-arm" in props["runners"]["description"] and dict(DEFAULT_RUNNERS)["arm64"] == (
        "ubuntu-24.04-arm",)


# --------------------------------------------------------------------------- runners

def test_top_level_runners_apply_to_every_image_and_image_runners_override_per_arch(tmp_path):
    options = load_text(tmp_path, """
        [runners]
        amd64 = ["ubuntu-22.04"]

        [images.cpu]
        dockerfile = "D"
        platforms = ["linux/amd64", "linux/arm64"]

        [images.rocm]
        dockerfile = "D"
        runners.amd64 = ["self-hosted", "linux", "rocm", "gfx942"]
    """)
    assert options.images["cpu"].runners == {"amd64": ("ubuntu-22.04",), "arm64": ("ubuntu-24.04-arm",)}
    assert options.images["rocm"].runners == {"amd64": ("self-hosted", "linux", "rocm", "gfx942"),
                                              "arm64": ("ubuntu-24.04-arm",)}


@pytest.mark.parametrize("value", ["self-hosted,linux,rocm", " self-hosted , linux ,rocm ",
                                   '["self-hosted", "linux", "rocm"]', "self-hosted\nlinux\nrocm\n"])
def test_image_runner_override_from_the_environment(tmp_path, value):
    options = load_text(tmp_path, TWO_IMAGES, {"GHBUILD_IMAGES_CPU_RUNNERS_AMD64": value})
    assert options.images["cpu"].runners["amd64"] == ("self-hosted", "linux", "rocm")
    assert options.images["cpu"].runners["arm64"] == ("ubuntu-24.04-arm",)
    assert options.images["rocm"].runners["amd64"] == ("self-hosted", "linux", "rocm")
    assert options.sources == {"images.cpu.runners.amd64": "GHBUILD_IMAGES_CPU_RUNNERS_AMD64"}


def test_top_level_runner_override_does_not_beat_an_image_setting(tmp_path):
    options = load_text(tmp_path, TWO_IMAGES, {"GHBUILD_RUNNERS_AMD64": "big-runner"})
    assert options.images["cpu"].runners["amd64"] == ("big-runner",)
    assert options.images["rocm"].runners["amd64"] == ("self-hosted", "linux", "rocm")


@pytest.mark.parametrize("labels", ['["a b"]', '["a,b"]', "[]"])
def test_bad_runner_labels(tmp_path, labels):
    message = config_error(tmp_path, f'[runners]\namd64 = {labels}\n' + MINIMAL)
    assert message.startswith(f"{tmp_path / 'ghbuild.toml'}: runners.amd64")


# --------------------------------------------------------------------------- GHBUILD_* overrides

def test_string_overrides(tmp_path):
    options = load_text(tmp_path, TWO_IMAGES, {
        "GHBUILD_REGISTRIES_STAGING": "127.0.0.1:5000/{owner}/{image}",
        "GHBUILD_TRUST_STABLE_BRANCH": "develop",
        "GHBUILD_SCCACHE_KEY_PREFIX": "ci/cache",
        "GHBUILD_SCCACHE_ENDPOINT": "http://127.0.0.1:9000",
        "GHBUILD_REGISTRIES_CACHE_MODE": "min",
        "GHBUILD_IMAGES_ROCM_TARGET": "runtime",
        "GHBUILD_PUBLISH_ARCH_SUFFIXES_ARM64": "aarch64",
    })
    assert options.registries.staging == "127.0.0.1:5000/{owner}/{image}"
    assert options.registries.cache == "ghcr.io/{owner}/cache"  # untouched
    assert options.trust.stable_branch == "develop"
    assert options.sccache.key_prefix == "ci/cache"
    assert options.sccache.endpoint == "http://127.0.0.1:9000"
    assert options.registries.cache_mode == "min"
    assert options.images["rocm"].target == "runtime"
    assert options.publish.arch_suffixes == {"amd64": "x86_64", "arm64": "aarch64"}
    assert options.sources == {
        "registries.staging": "GHBUILD_REGISTRIES_STAGING",
        "trust.stable-branch": "GHBUILD_TRUST_STABLE_BRANCH",
        "sccache.key-prefix": "GHBUILD_SCCACHE_KEY_PREFIX",
        "sccache.endpoint": "GHBUILD_SCCACHE_ENDPOINT",
        "registries.cache-mode": "GHBUILD_REGISTRIES_CACHE_MODE",
        "images.rocm.target": "GHBUILD_IMAGES_ROCM_TARGET",
        "publish.arch-suffixes.arm64": "GHBUILD_PUBLISH_ARCH_SUFFIXES_ARM64",
    }


@pytest.mark.parametrize(("text", "value"), [
    ("true", True), ("on", True), ("1", True), ("TRUE", True), (" On ", True),
    ("false", False), ("off", False), ("0", False), ("False", False), ("0\n", False),
])
def test_boolean_overrides(tmp_path, text, value):
    options = load_text(tmp_path, MINIMAL, {"GHBUILD_REGISTRIES_GHA_CACHE": text, "GHBUILD_SCCACHE_ENABLED": text})
    assert options.registries.gha_cache is value
    assert options.sccache.enabled is value


@pytest.mark.parametrize("text", ["yes", "no", "", "enabled", "2", "truee"])
def test_booleans_accept_only_the_six_words(tmp_path, text):
    message = config_error(tmp_path, MINIMAL, {"GHBUILD_REGISTRIES_GHA_CACHE": text})
    assert message.startswith("GHBUILD_REGISTRIES_GHA_CACHE: ")
    assert "true, on, 1, false, off, 0" in message


def test_integer_override(tmp_path):
    options = load_text(tmp_path, MINIMAL, {"GHBUILD_PUBLISH_RETENTION": " 30 "})
    assert options.publish.retention == 30


def test_integer_override_that_is_not_an_integer(tmp_path):
    message = config_error(tmp_path, MINIMAL, {"GHBUILD_PUBLISH_RETENTION": "two weeks"})
    assert message == "GHBUILD_PUBLISH_RETENTION: 'two weeks' is not an integer"


def test_integer_override_below_the_minimum_names_the_variable_and_key(tmp_path):
    message = config_error(tmp_path, MINIMAL, {"GHBUILD_PUBLISH_RETENTION": "0"})
    assert message.startswith("GHBUILD_PUBLISH_RETENTION (overrides publish.retention): ")


@pytest.mark.parametrize("value", ["linux/amd64,linux/arm64", '["linux/amd64", "linux/arm64"]'])
def test_array_override(tmp_path, value):
    options = load_text(tmp_path, MINIMAL, {"GHBUILD_IMAGES_CPU_PLATFORMS": value})
    assert options.images["cpu"].platforms == ("linux/amd64", "linux/arm64")
    assert options.images["cpu"].arches == ("amd64", "arm64")


def test_array_override_with_a_bad_item_names_the_variable(tmp_path):
    """The value came from the variable, so the message must say so, not blame the file."""
    message = config_error(tmp_path, MINIMAL, {"GHBUILD_IMAGES_CPU_PLATFORMS": "linux/amd64,linux/s390x"})
    assert message.startswith("GHBUILD_IMAGES_CPU_PLATFORMS (overrides images.cpu.platforms[1]): ")
    assert "linux/s390x" in message
    assert str(tmp_path) not in message


def test_array_override_with_invalid_json(tmp_path):
    message = config_error(tmp_path, MINIMAL, {"GHBUILD_IMAGES_CPU_PLATFORMS": '["linux/amd64",'})
    assert message.startswith("GHBUILD_IMAGES_CPU_PLATFORMS: invalid JSON")


@pytest.mark.parametrize("value", ["CUDA=yes,EXTRA=1", '{"CUDA": "yes", "EXTRA": "1"}', "CUDA=yes\nEXTRA=1\n"])
def test_build_args_are_merged_per_key(tmp_path, value):
    options = load_text(tmp_path, TWO_IMAGES, {"GHBUILD_IMAGES_CPU_BUILD_ARGS": value})
    assert options.images["cpu"].build_args == {"PYTHON_VERSION": "3.12", "CUDA": "yes", "EXTRA": "1"}
    assert options.sources == {"images.cpu.build-args": "GHBUILD_IMAGES_CPU_BUILD_ARGS"}


def test_build_args_override_on_an_image_without_build_args(tmp_path):
    options = load_text(tmp_path, TWO_IMAGES, {"GHBUILD_IMAGES_ROCM_BUILD_ARGS": "GFX=gfx942"})
    assert options.images["rocm"].build_args == {"GFX": "gfx942"}


def test_build_args_value_may_contain_an_equals_sign(tmp_path):
    options = load_text(tmp_path, MINIMAL, {"GHBUILD_IMAGES_CPU_BUILD_ARGS": "FLAGS=-O2 -DX=1"})
    assert options.images["cpu"].build_args == {"FLAGS": "-O2 -DX=1"}


def test_build_args_item_without_equals(tmp_path):
    message = config_error(tmp_path, MINIMAL, {"GHBUILD_IMAGES_CPU_BUILD_ARGS": "A=1,JUSTANAME"})
    assert message.startswith("GHBUILD_IMAGES_CPU_BUILD_ARGS: expected KEY=VALUE")
    assert "JUSTANAME" in message


def test_build_args_value_of_the_wrong_type_from_json(tmp_path):
    message = config_error(tmp_path, MINIMAL, {"GHBUILD_IMAGES_CPU_BUILD_ARGS": '{"JOBS": 8}'})
    assert message.startswith("GHBUILD_IMAGES_CPU_BUILD_ARGS (overrides images.cpu.build-args.JOBS): ")


def test_image_names_with_dashes_map_to_underscores(tmp_path):
    options = load_text(tmp_path, '[images.cpu-dev]\ndockerfile = "D"\n',
                        {"GHBUILD_IMAGES_CPU_DEV_TARGET": "dev"})
    assert options.images["cpu-dev"].target == "dev"
    assert options.sources == {"images.cpu-dev.target": "GHBUILD_IMAGES_CPU_DEV_TARGET"}


def test_two_image_names_that_map_to_one_variable_are_refused(tmp_path):
    message = config_error(tmp_path, '[images.cpu-dev]\ndockerfile = "D"\n[images.cpu_dev]\ndockerfile = "D"\n')
    assert "GHBUILD_IMAGES_CPU_DEV_" in message and "rename one of the images" in message


@pytest.mark.parametrize(("var", "hint"), [
    ("GHBUILD_SCCACHE_KEYPREFIX", "GHBUILD_SCCACHE_KEY_PREFIX"),
    ("GHBUILD_REGISTRIES_GHACACHE", "GHBUILD_REGISTRIES_GHA_CACHE"),
    ("GHBUILD_IMAGES_CPU_PLATFORM", "GHBUILD_IMAGES_CPU_PLATFORMS"),
    ("GHBUILD_TRUST_STABLE_BRANCHES", "GHBUILD_TRUST_STABLE_BRANCH"),
])
def test_unknown_setting_is_an_error_with_a_suggestion(tmp_path, var, hint):
    message = config_error(tmp_path, MINIMAL, {var: "x"})
    assert message == f"{var}: unknown setting (did you mean {hint}?)"


def test_setting_for_an_image_that_is_not_configured(tmp_path):
    message = config_error(tmp_path, MINIMAL, {"GHBUILD_IMAGES_GPU_DOCKERFILE": "D"})
    assert message.startswith("GHBUILD_IMAGES_GPU_DOCKERFILE: unknown setting")


def test_variables_outside_the_setting_sections_are_not_settings(tmp_path):
    options = load_text(tmp_path, MINIMAL, {"GHBUILD_CONFIG": "", "GHBUILD_VERSION": "1", "GHBUILDX": "y",
                                            "GITHUB_TOKEN": "x"})
    assert options.sources == {}


def test_every_documented_variable_exists():
    """The table of variables in docs/configuration.md, against the mapping ghbuild really uses."""
    mapping = environment.env_mapping(["cpu"])
    documented = {
        "GHBUILD_TRUST_CANONICAL_REPOSITORY", "GHBUILD_TRUST_STABLE_BRANCH", "GHBUILD_TRUST_SELF_HOSTED_FOR_FORKS",
        "GHBUILD_TRUST_HOSTED_RUNNER_LABELS", "GHBUILD_REGISTRIES_CACHE",
        "GHBUILD_REGISTRIES_STAGING", "GHBUILD_REGISTRIES_PUBLISH", "GHBUILD_REGISTRIES_GHA_CACHE",
        "GHBUILD_REGISTRIES_CACHE_MODE", "GHBUILD_SCCACHE_ENABLED", "GHBUILD_SCCACHE_BUCKET",
        "GHBUILD_SCCACHE_REGION", "GHBUILD_SCCACHE_ENDPOINT", "GHBUILD_SCCACHE_KEY_PREFIX",
        "GHBUILD_SCCACHE_HELPER_IMAGE",
        "GHBUILD_PUBLISH_NIGHTLY_TAG", "GHBUILD_PUBLISH_RETENTION", "GHBUILD_PUBLISH_ARCH_SUFFIXES_AMD64",
        "GHBUILD_PUBLISH_ARCH_SUFFIXES_ARM64", "GHBUILD_RUNNERS_AMD64", "GHBUILD_RUNNERS_ARM64",
        "GHBUILD_IMAGES_CPU_PLATFORMS", "GHBUILD_IMAGES_CPU_RUNNERS_ARM64", "GHBUILD_IMAGES_CPU_BUILD_ARGS",
        "GHBUILD_IMAGES_CPU_DOCKERFILE", "GHBUILD_IMAGES_CPU_CONTEXT", "GHBUILD_IMAGES_CPU_TARGET",
        "GHBUILD_IMAGES_CPU_STAGING", "GHBUILD_IMAGES_CPU_PUBLISH", "GHBUILD_IMAGES_CPU_RUNNERS_AMD64",
        "GHBUILD_IMAGES_CPU_BASE_IMAGE", "GHBUILD_IMAGES_CPU_SIZE_BUDGET", "GHBUILD_IMAGES_CPU_STAGE_BUDGETS",
        "GHBUILD_IMAGES_CPU_BASE", "GHBUILD_IMAGES_CPU_IDENTITY_VERSION", "GHBUILD_IMAGES_CPU_IDENTITY_INPUTS",
        "GHBUILD_IMAGES_CPU_IDENTITY_PREFIX", "GHBUILD_IMAGES_CPU_CACHE_MOUNTS",
        "GHBUILD_IMAGES_CPU_ATTEST_PROVENANCE", "GHBUILD_IMAGES_CPU_ATTEST_SBOM",
        "GHBUILD_IMAGES_CPU_ATTEST_SBOM_GENERATOR",
        "GHBUILD_BUILD_BUILDER", "GHBUILD_BUILD_BUILDER_NETWORK", "GHBUILD_BUILD_NETWORK", "GHBUILD_BUILD_PROVENANCE",
        "GHBUILD_BUILD_BASE_IMAGE", "GHBUILD_BUILD_CACHE_MOUNT_IMAGE", "GHBUILD_BUILD_SBOM_GENERATOR",
        "GHBUILD_CACHE_BUDGET",
        "GHBUILD_CACHE_WARN_SHARE",
    }
    assert set(mapping) == documented
    assert mapping["GHBUILD_SCCACHE_KEY_PREFIX"][0] == ("sccache", "key-prefix")
    assert mapping["GHBUILD_IMAGES_CPU_RUNNERS_ARM64"][0] == ("images", "cpu", "runners", "arm64")


def test_trailing_newline_from_a_yaml_block_scalar_is_trimmed(tmp_path):
    """`env: {X: |\n  value}` in a workflow gives "value\n": the newline must not reach a tag or --target."""
    options = load_text(tmp_path, MINIMAL, {"GHBUILD_IMAGES_CPU_TARGET": "runtime\n",
                                            "GHBUILD_PUBLISH_NIGHTLY_TAG": "nightly\n",
                                            "GHBUILD_REGISTRIES_STAGING": "ghcr.io/{owner}/ci-{image}\n",
                                            "GHBUILD_TRUST_STABLE_BRANCH": " main\n"})
    assert options.images["cpu"].target == "runtime"
    assert options.publish.nightly_tag == "nightly"
    assert options.registries.staging == "ghcr.io/{owner}/ci-{image}"
    assert options.trust.stable_branch == "main"


@pytest.mark.parametrize(("var", "key", "value"), [
    ("GHBUILD_IMAGES_CPU_TARGET", "images.cpu.target", "run\ntime"),
    ("GHBUILD_PUBLISH_NIGHTLY_TAG", "publish.nightly-tag", "night ly"),
    ("GHBUILD_REGISTRIES_STAGING", "registries.staging", "ghcr.io/{owner}/ci-{image}\n:x"),
])
def test_inner_newline_or_space_is_not_a_valid_name(tmp_path, var, key, value):
    message = config_error(tmp_path, MINIMAL, {var: value})
    assert message.startswith(f"{var} (overrides {key}")


# --------------------------------------------------------------------------- validation messages

def test_unknown_key_names_file_key_and_suggestion(tmp_path):
    message = config_error(tmp_path, '[images.cpu]\ndockerfile = "D"\nplatfroms = ["linux/amd64"]\n')
    assert message == f"{tmp_path / 'ghbuild.toml'}: images.cpu.platfroms: unknown key (did you mean 'platforms'?)"


def test_typo_in_a_required_key_is_reported_as_the_typo(tmp_path):
    message = config_error(tmp_path, '[images.cpu]\ndockerfle = "D"\n')
    assert message == f"{tmp_path / 'ghbuild.toml'}: images.cpu.dockerfle: unknown key (did you mean 'dockerfile'?)"


@pytest.mark.parametrize(("text", "key"), [
    ("[registry]\ncache = 'x'\n" + MINIMAL, "registry"),
    ("[sccache]\nbuckets = 'b'\n" + MINIMAL, "sccache.buckets"),
    ("[runners]\nx86 = ['a']\n" + MINIMAL, "runners.x86"),
    ("[publish.arch-suffixes]\nriscv64 = 'rv'\n" + MINIMAL, "publish.arch-suffixes.riscv64"),
])
def test_unknown_keys_anywhere(tmp_path, text, key):
    message = config_error(tmp_path, text)
    assert message.startswith(f"{tmp_path / 'ghbuild.toml'}: {key}: unknown key")


@pytest.mark.parametrize(("text", "key", "fragment"), [
    ('[images.cpu]\ndockerfile = "D"\nplatforms = "linux/amd64"\n', "images.cpu.platforms",
     "'linux/amd64' is not a list [...]"),
    ('[images.cpu]\ndockerfile = 3\n', "images.cpu.dockerfile", "3 is not text (a quoted string)"),
    ('[registries]\ngha-cache = "yes"\n' + MINIMAL, "registries.gha-cache", "'yes' is not true or false"),
    ('[publish]\nretention = "14"\n' + MINIMAL, "publish.retention", "'14' is not a whole number"),
    ('[images.cpu]\ndockerfile = "D"\nplatforms = ["linux/amd64", "linux/s390x"]\n', "images.cpu.platforms[1]",
     "'linux/s390x' is not one of"),
    ('[images.cpu]\ndockerfile = "D"\nplatforms = ["linux/amd64", "linux/amd64"]\n', "images.cpu.platforms",
     "non-unique"),
    ('[images.cpu]\ncontext = "."\n', "images.cpu", "'dockerfile' is a required property"),
    ('[images.CPU]\ndockerfile = "D"\n', "images", "'CPU' is not allowed here (it must match ^[a-z0-9]"),
    ('[registries]\ncache-mode = "all"\n' + MINIMAL, "registries.cache-mode", "'all' is not one of 'max', 'min'"),
    ('[publish.arch-suffixes]\namd64 = "arm64"\n' + MINIMAL, "publish.arch-suffixes",
     "amd64 and arm64 need different suffixes"),
    ("[trust]\nstable-branch = ''\n" + MINIMAL, "trust.stable-branch", "should be non-empty"),
    ("[images]\n", "images", "should be non-empty"),
    ("[trust]\n", "(top level)", "'images' is a required property"),
])
def test_wrong_values_name_file_and_key(tmp_path, text, key, fragment):
    message = config_error(tmp_path, text)
    assert message.startswith(f"{tmp_path / 'ghbuild.toml'}: {key}: ")
    assert fragment in message


# --------------------------------------------------------------------------- repositories

def test_repository_templates_expand_image_and_lower_cased_owner():
    assert naming.expand_repository("ghcr.io/{owner}/ci-{image}", "cpu", "Crazy-Max") == "ghcr.io/crazy-max/ci-cpu"
    assert naming.expand_repository("docker.io/org/{image}", "rocm", "x") == "docker.io/org/rocm"


def test_repository_templates_reach_the_plan(tmp_path):
    options = load_text(tmp_path, TWO_IMAGES)
    ctx = context.from_environment(
        {}, context.ContextFlags(event="push", repository="Some-Owner/project", ref="main", sha=SHA,
                              default_branch="main"), tmp_path)
    plan = planner.plan(ctx, options)
    assert plan.job("cpu", "amd64").tags == (f"ghcr.io/some-owner/ci-cpu:{SHA}-x86_64",)
    assert plan.job("rocm", "amd64").tags == (f"ghcr.io/some-owner/ci-rocm:{SHA}-x86_64",)
    assert "type=registry,ref=ghcr.io/some-owner/cache:main-cpu-arm64" in plan.job("cpu", "arm64").cache_from


@pytest.mark.parametrize("role", ["staging", "publish"])
def test_two_images_sharing_a_repository_are_refused(tmp_path, role):
    message = config_error(tmp_path, f"""
        [registries]
        {role} = "ghcr.io/{{owner}}/ci"

        [images.cpu]
        dockerfile = "D"

        [images.rocm]
        dockerfile = "D"
    """)
    assert message.startswith(f"{tmp_path / 'ghbuild.toml'}: registries.{role}: ")
    assert f"images cpu and rocm would share the {role} repository ghcr.io/owner/ci" in message
    assert "{image}" in message


def test_two_images_with_the_same_own_staging_repository_are_refused(tmp_path):
    message = config_error(tmp_path, """
        [images.cpu]
        dockerfile = "D"
        staging = "ghcr.io/org/ci"

        [images.rocm]
        dockerfile = "D"
        staging = "ghcr.io/org/ci"
    """)
    assert message.startswith(f"{tmp_path / 'ghbuild.toml'}: images.rocm.staging: ")


def test_an_image_overriding_a_shared_repository_is_fine(tmp_path):
    options = load_text(tmp_path, """
        [registries]
        staging = "ghcr.io/org/ci"

        [images.cpu]
        dockerfile = "D"

        [images.rocm]
        dockerfile = "D"
        staging = "ghcr.io/org/ci-rocm"
    """)
    assert options.images["rocm"].staging == "ghcr.io/org/ci-rocm"


def test_sharing_via_an_override_names_the_variable(tmp_path):
    message = config_error(tmp_path, TWO_IMAGES, {"GHBUILD_REGISTRIES_STAGING": "ghcr.io/org/ci"})
    assert message.startswith("GHBUILD_REGISTRIES_STAGING (overrides registries.staging): images cpu and rocm")


@pytest.mark.parametrize(("template", "fragment"), [
    ("ghcr.io/{owner}/{repo}", "unknown placeholder {repo}"),
    ("ghcr.io/Org/{image}", "not a valid image repository"),
    ("ghcr.io/org/{image}:latest", "not a valid image repository"),
    ("ghcr.io/org/{image} ", "not a valid image repository"),
])
def test_bad_repository_templates(tmp_path, template, fragment):
    message = config_error(tmp_path, f'[registries]\ncache = "{template}"\n' + MINIMAL)
    assert message.startswith(f"{tmp_path / 'ghbuild.toml'}: registries.cache: ")
    assert fragment in message


# --------------------------------------------------------------------------- secrets

@pytest.mark.parametrize("name", ["GITHUB_TOKEN", "NPM_TOKEN", "HF_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD",
                                  "PASSWD", "REGISTRY_CREDENTIALS", "SSH_PRIVATE_KEY", "AWS_ACCESS_KEY_ID",
                                  "OPENAI_API_KEY", "client_secret"])
def test_secret_looking_build_arg_names_are_refused(tmp_path, name):
    message = config_error(tmp_path, f'[images.cpu]\ndockerfile = "D"\nbuild-args = {{ {name} = "hunter2" }}\n')
    assert message.startswith(f"{tmp_path / 'ghbuild.toml'}: images.cpu.build-args.{name}: looks like a secret")
    assert "BuildKit secrets" in message
    assert "hunter2" not in message


def test_secret_looking_build_arg_from_the_environment_names_the_variable(tmp_path):
    message = config_error(tmp_path, MINIMAL, {"GHBUILD_IMAGES_CPU_BUILD_ARGS": "GH_TOKEN=ghp_abc"})
    assert message.startswith("GHBUILD_IMAGES_CPU_BUILD_ARGS (overrides images.cpu.build-args.GH_TOKEN): ")
    assert "ghp_abc" not in message


@pytest.mark.parametrize("name", ["PYTHON_VERSION", "MAX_JOBS", "TORCH_CUDA_ARCH_LIST", "PYTORCH_ROCM_ARCH",
                                  "USE_SCCACHE", "BASE_IMAGE", "TOKENIZERS_PARALLELISM", "MAX_TOKENS"])
def test_ordinary_build_arg_names_pass(tmp_path, name):
    options = load_text(tmp_path, f'[images.cpu]\ndockerfile = "D"\nbuild-args = {{ {name} = "1" }}\n')
    assert options.images["cpu"].build_args == {name: "1"}


# --------------------------------------------------------------------------- sccache endpoint

@pytest.mark.parametrize("endpoint", ["https://user:s3cr3tpass@minio.example.com",
                                      "https://s3cr3tpass@minio.example.com",
                                      "https://minio.example.com/?X-Amz-Signature=s3cr3tpass",
                                      "https://minio.example.com/#s3cr3tpass",
                                      "https://minio.example.com/\ns3cr3tpass",
                                      "ftp://s3cr3tpass.example.com",
                                      "s3cr3tpass"])
def test_bad_sccache_endpoint_is_refused_without_echoing_it(tmp_path, endpoint):
    message = config_error(tmp_path, f"[sccache]\nendpoint = {json.dumps(endpoint)}\n" + MINIMAL)
    assert message.startswith(f"{tmp_path / 'ghbuild.toml'}: sccache.endpoint: ")
    assert "value not shown" in message
    assert "s3cr3tpass" not in message


def test_bad_sccache_endpoint_from_the_environment(tmp_path):
    message = config_error(tmp_path, MINIMAL, {"GHBUILD_SCCACHE_ENDPOINT": "https://AKIA:wJalrXUtnFEMI@s3.local"})
    assert message.startswith("GHBUILD_SCCACHE_ENDPOINT (overrides sccache.endpoint): endpoint contains user info")
    assert "wJalrXUtnFEMI" not in message and "AKIA" not in message


@pytest.mark.parametrize("endpoint", ["", "http://127.0.0.1:9000", "https://s3.us-east-1.amazonaws.com",
                                      "https://minio.example.com/base/"])
def test_good_sccache_endpoints(tmp_path, endpoint):
    options = load_text(tmp_path, f"[sccache]\nendpoint = {json.dumps(endpoint)}\n" + MINIMAL)
    assert options.sccache.endpoint == (endpoint or None)


# --------------------------------------------------------------------------- trust

@pytest.mark.parametrize("value", ["Org/Repo", "https://github.com/Org/Repo", "https://github.com/Org/Repo.git",
                                   "https://github.com/Org/Repo/", "git@github.com:Org/Repo.git",
                                   "ssh://git@github.com/Org/Repo", "ssh://git@github.com/org/repo.git/"])
def test_canonical_repository_url_forms_are_normalised(tmp_path, value):
    options = load_text(tmp_path, f"[trust]\ncanonical-repository = {json.dumps(value)}\n" + MINIMAL)
    assert options.trust.canonical_repository == "org/repo"


def test_canonical_repository_from_the_environment(tmp_path):
    options = load_text(tmp_path, MINIMAL, {"GHBUILD_TRUST_CANONICAL_REPOSITORY": "https://github.com/A/B.git"})
    assert options.trust.canonical_repository == "a/b"
    assert options.sources == {"trust.canonical-repository": "GHBUILD_TRUST_CANONICAL_REPOSITORY"}


@pytest.mark.parametrize("value", ["https://gitlab.com/org/repo", "org", "org/repo/tree/main"])
def test_canonical_repository_that_is_not_a_github_repository(tmp_path, value):
    message = config_error(tmp_path, f"[trust]\ncanonical-repository = {json.dumps(value)}\n" + MINIMAL)
    assert message.startswith(f"{tmp_path / 'ghbuild.toml'}: trust.canonical-repository: ")


# --------------------------------------------------------------------------- the repository's own config

def test_the_repositorys_own_config_loads_and_plans():
    options = configfile.load(None, {}, REPO_ROOT)
    assert options.config_path == REPO_ROOT / "ghbuild.toml"
    assert options.trust.canonical_repository == "ghbuild/ghbuild"
    ctx = context.from_environment(
        {}, context.ContextFlags(event="push", repository="ghbuild/ghbuild", ref="main", sha=SHA,
                              default_branch="main"), REPO_ROOT)
    plan = planner.plan(ctx, options)
    assert plan.trust.trusted
    assert plan.warnings == ()
    assert [(j.image, j.arch, j.platform, j.runs_on) for j in plan.jobs] == [
        ("cpu", "amd64", "linux/amd64", ("ubuntu-24.04",)),
        ("cpu", "arm64", "linux/arm64", ("ubuntu-24.04-arm",)),
        ("rocm-base", "amd64", "linux/amd64", ("self-hosted", "linux", "rocm")),
        ("rocm", "amd64", "linux/amd64", ("self-hosted", "linux", "rocm")),
    ]
    assert plan.job("rocm", "amd64").base == "rocm-base"
    assert plan.job("rocm-base", "amd64").identity_prefix == "rocm-base"
    assert plan.job("cpu", "arm64").tags == (f"ghcr.io/ghbuild/ghbuild-cpu:{SHA}-arm64",)
    assert plan.job("rocm", "amd64").tags == (f"ghcr.io/ghbuild/ghbuild-rocm:{SHA}-x86_64",)
    assert {job.image: job.target for job in plan.jobs} == {"cpu": "runtime", "rocm-base": "base", "rocm": "runtime"}


def test_the_repositorys_own_config_is_valid_against_the_shipped_schema():
    from jsonschema import Draft202012Validator

    with (REPO_ROOT / "ghbuild.toml").open("rb") as fh:
        data = tomllib.load(fh)
    Draft202012Validator.check_schema(schema.document())
    assert list(Draft202012Validator(schema.document()).iter_errors(data)) == []


def test_size_budgets_parse_and_bad_sizes_name_the_key(tmp_path):
    options = load_text(tmp_path, MINIMAL, {"GHBUILD_IMAGES_CPU_SIZE_BUDGET": "1.5GB",
                                            "GHBUILD_IMAGES_CPU_STAGE_BUDGETS": "runtime=200MiB,cpp=10000"})
    assert options.images["cpu"].size_budget == 1_500_000_000
    assert options.images["cpu"].stage_budgets == {"runtime": 200 * 2**20, "cpp": 10000}
    message = config_error(tmp_path, MINIMAL, {"GHBUILD_IMAGES_CPU_SIZE_BUDGET": "lots"})
    assert message.startswith("GHBUILD_IMAGES_CPU_SIZE_BUDGET (overrides images.cpu.size-budget")


# --------------------------------------------------------------------------- content-addressed bases

_BASE_CFG = """
[images.base]
dockerfile = "Dockerfile.base"
platforms = ["linux/amd64"]
identity = {{ version = "3", inputs = ["src/**"] }}

[images.app]
dockerfile = "Dockerfile.app"
platforms = {platforms}
{extra}
"""


def test_identity_and_base_are_read(tmp_path):
    options = load_text(tmp_path, _BASE_CFG.format(platforms='["linux/amd64"]', extra='base = "base"'))
    assert options.images["base"].identity.version == "3"
    assert options.images["base"].identity.inputs == ("src/**",)
    assert options.images["base"].identity.prefix == "base"
    assert options.images["app"].base == "base" and options.images["app"].identity is None


@pytest.mark.parametrize(("platforms", "extra", "message"), [
    ('["linux/amd64"]', 'base = "nope"', r"images\.app\.base: no image named 'nope'"),
    ('["linux/amd64"]', 'base = "app"', r"images\.app\.base: image 'app' has no \[images\.app\.identity\]"),
    ('["linux/amd64", "linux/arm64"]', 'base = "base"', r"images\.app\.base: 'base' is not built for linux/arm64"),
    ('["linux/amd64"]', 'base = "base"\nbase-image = "debian"', r"images\.app\.base-image: set either"),
    ('["linux/amd64"]', 'identity = { inputs = ["x"] }', r"images\.app\.identity: 'version' is a required"),
])
def test_bad_base_settings_name_the_key(tmp_path, platforms, extra, message):
    with pytest.raises(ConfigError, match=message):
        load_text(tmp_path, _BASE_CFG.format(platforms=platforms, extra=extra))
