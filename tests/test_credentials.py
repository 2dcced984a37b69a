"""Registry credentials as `docker push` finds them: `auths` entries and credential helpers (credHelpers,
credsStore) run through the Docker SDK's auth handling, with a real helper program speaking the helper
protocol (`get`, the server on stdin, JSON on stdout)."""

from __future__ import annotations

import base64
import json
import os
import stat

import pytest

from ghbuild import credentials

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
    """Without the docker extra (no Docker SDK): no config file means the next source, a config file means a
    one-line error naming the extra, never an ImportError."""
    from ghbuild.errors import UsageError

    env, write_config, _ = docker_home
    monkeypatch.setitem(__import__("sys").modules, "docker", None)    # what `import docker` meets without it
    assert credentials.for_host("ghcr.io", {**env, "GITHUB_TOKEN": "t"}) == credentials.Credentials("github-actions", "t")
    write_config({"auths": {"ghcr.io": {"auth": base64.b64encode(b"u:p").decode()}}})
    with pytest.raises(UsageError, match=r"needs the Python package 'docker'.*ghbuild\[docker\]"):
        credentials.for_host("ghcr.io", env)
