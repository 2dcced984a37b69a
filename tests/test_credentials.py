"""Registry credentials as `docker push` finds them: `auths` entries and credential helpers (credHelpers,
credsStore) run through the Docker SDK's auth handling, with a real helper program speaking the helper
protocol (`get`, the server on stdin, JSON on stdout)."""

from __future__ import annotations

import base64
import json
import os
import stat

import pytest

from ghbuild.registry import credentials

HELPER = """#!/bin/sh
# docker-credential-{name}: answers `get` for {server} only, like a real helper
read server
[ "$1" = get ] && [ "$server" = "{server}" ] || {{ echo "credentials not found in native keychain"; exit 1; }}
printf '{{"ServerURL": "%s", "Username": "{user}", "Secret": "{secret}"}}' "$server"
"""


@pytest.fixture
def docker_home(tmp_path, monkeypatch):
    """A DOCKER_CONFIG folder, a bin folder on PATH for helpers; returns (env, write_config, add_helper)."""
    bin_dir, config_dir = tmp_path / "bin", tmp_path / "docker"
    bin_dir.mkdir()
    config_dir.mkdir()
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    env = {"DOCKER_CONFIG": str(config_dir), "HOME": str(tmp_path), "PATH": os.environ["PATH"]}

    def write_config(data: dict) -> None:
        (config_dir / "config.json").write_text(json.dumps(data))

    def add_helper(name: str, server: str, user: str, secret: str) -> None:
        path = bin_dir / f"docker-credential-{name}"
        path.write_text(HELPER.format(name=name, server=server, user=user, secret=secret))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)

    return env, write_config, add_helper


def test_auths_entry_as_docker_login_writes_it(docker_home):
    env, write_config, _ = docker_home
    write_config({"auths": {"registry.example.com": {"auth": base64.b64encode(b"ci:s3cret").decode()}}})
    assert credentials.for_host("registry.example.com", env) == credentials.Credentials("ci", "s3cret")
    assert credentials.for_host("other.example.com", env) is None


def test_cred_helpers_per_registry_are_run(docker_home):
    env, write_config, add_helper = docker_home
    add_helper("ecr-like", "registry.example.com", "AWS", "from-helper")
    write_config({"credHelpers": {"registry.example.com": "ecr-like"}})
    assert credentials.for_host("registry.example.com", env) == credentials.Credentials("AWS", "from-helper")


def test_creds_store_answers_for_docker_hub_under_the_index_url(docker_home):
    env, write_config, add_helper = docker_home
    add_helper("store", "https://index.docker.io/v1/", "hubuser", "hubtoken")
    write_config({"credsStore": "store", "auths": {"https://index.docker.io/v1/": {}}})
    for host in ("docker.io", "registry-1.docker.io", "index.docker.io"):
        assert credentials.for_host(host, env) == credentials.Credentials("hubuser", "hubtoken")


def test_a_missing_helper_or_config_means_the_next_source(docker_home):
    env, write_config, _ = docker_home
    assert credentials.for_host("ghcr.io", {**env, "GITHUB_TOKEN": "ghs_x"}) == credentials.Credentials(
        "github-actions", "ghs_x")
    write_config({"credHelpers": {"registry.example.com": "not-installed"}})
    assert credentials.for_host("registry.example.com", env) is None


def test_a_light_install_reads_no_docker_config_it_does_not_have(docker_home, monkeypatch):
    """Without the docker extra (no Docker SDK): no config file means the next source; a login as `docker login`
    writes it is read all the same; a config naming a credential helper means a one-line error naming the
    extra, never an ImportError."""
    from ghbuild.errors import UsageError

    env, write_config, _ = docker_home
    monkeypatch.setitem(__import__("sys").modules, "docker", None)    # what `import docker` meets without it
    found = credentials.for_host("ghcr.io", {**env, "GITHUB_TOKEN": "t"})
    assert found == credentials.Credentials("github-actions", "t")
    write_config({"auths": {"ghcr.io": {"auth": base64.b64encode(b"u:p").decode()}}})
    assert credentials.for_host("ghcr.io", env) == credentials.Credentials("u", "p")
    write_config({"credHelpers": {"ghcr.io": "gcloud"}})
    with pytest.raises(UsageError, match=r"needs the Python package 'docker'.*ghbuild\[docker\]"):
        credentials.for_host("ghcr.io", env)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


PLAIN_CONFIGS = [
    {"auths": {"registry.example.com": {"auth": _b64("ci:s3cret")}}},
    {"auths": {"https://registry.example.com/v2/": {"auth": _b64("ci:pa:ss")}}},
    {"auths": {"http://registry.example.com": {"auth": _b64("ci:x")},
               "registry.example.com": {"auth": _b64("exact:y")}}},
    {"auths": {"https://index.docker.io/v1/": {"auth": _b64("hubuser:hubtoken"), "email": "a@b.c"}}},
    {"auths": {"docker.io": {"auth": _b64("hubuser:t2")}}},
    {"auths": {"registry.example.com": {"identitytoken": "refresh-token"}}},
    {"auths": {"registry.example.com": {"auth": ""}}},
    {"auths": {"registry.example.com": {"auth": _b64("nopassword")}}},
    {"auths": {"other.example.com": {"auth": _b64("ci:elsewhere")}}},
    {"auths": {"Registry.Example.com": {"auth": _b64("ci:case")}}},
    {"auths": {}},
    {},
]


@pytest.mark.parametrize("config", PLAIN_CONFIGS)
@pytest.mark.parametrize("host", ["registry.example.com", "docker.io", "registry-1.docker.io", "other.example.com"])
def test_a_config_without_helpers_is_read_as_the_docker_sdk_reads_it(docker_home, config, host):
    """The fast path (no SDK import) gives exactly what the Docker SDK gives for configs that name no helper."""
    env, write_config, _ = docker_home
    write_config(config)
    path = os.path.join(env["DOCKER_CONFIG"], "config.json")
    decided, fast = credentials._plain_auths(path, host)
    from docker import auth

    try:
        entry = auth.load_config(path, credstore_env=env).resolve_authconfig(
            None if host in credentials.DOCKER_HUB_HOSTS else host)
    except ValueError:      # the SDK refuses the file (an `auth` without a colon): ghbuild then reads nothing
        entry = None
    entry = {key.lower(): value for key, value in (entry or {}).items()}
    sdk = (credentials.Credentials(entry["username"], entry["password"])
           if entry.get("username") and entry.get("password") else None)
    assert decided and fast == sdk, (config, host, fast, sdk)


@pytest.mark.parametrize("config", [
    {"credsStore": "desktop", "auths": {"registry.example.com": {}}},
    {"credHelpers": {"registry.example.com": "ecr-login"}},
    {"auths": {"registry.example.com": {"username": "u", "password": "p"}}},
])
def test_a_config_that_names_a_helper_or_another_shape_goes_to_the_sdk(docker_home, config):
    env, write_config, _ = docker_home
    write_config(config)
    assert credentials._plain_auths(os.path.join(env["DOCKER_CONFIG"], "config.json"), "registry.example.com") \
        == (False, None)


def test_reading_a_login_written_by_docker_login_imports_no_docker_sdk(docker_home):
    import subprocess
    import sys

    env, write_config, _ = docker_home
    write_config({"auths": {"registry.example.com": {"auth": _b64("ci:s3cret")}}})
    probe = ("import sys\nfrom ghbuild.registry import credentials\n"
             "c = credentials.for_host('registry.example.com')\n"
             "print(c.username, 'docker' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                            env={**os.environ, **env})
    assert result.stdout.split() == ["ci", "False"], result.stderr


@pytest.mark.parametrize("holder", [credentials.Credentials("ci", "s3cret"),
                                    __import__("ghbuild.build.sccache").build.sccache.SccacheDecision(
                                        "read-write", "credentials found", {"SCCACHE_BUCKET": "b"},
                                        "AWS_SECRET_ACCESS_KEY=s3cret\n")])
def test_a_value_holding_a_secret_cannot_be_printed_iterated_encoded_or_changed(holder):
    assert "s3cret" not in repr(holder) and "s3cret" not in str(holder) and "s3cret" not in f"{[holder]}"
    for leak in (lambda: json.dumps(holder), lambda: list(holder), lambda: tuple(holder)):
        with pytest.raises(TypeError):
            leak()
    with pytest.raises(AttributeError):
        holder.__setattr__(holder.__slots__[0], "other")
    assert holder == type(holder)(*[getattr(holder, name) for name in holder.__slots__])

