"""Which buildx builder a build runs on (docker_client.resolve_builder) and whether it can use the GitHub
Actions cache (ghacache): decided from what a docker CLI answers, here a fake one that records every call."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from ghbuild.build import builders, engine, ghacache
from ghbuild.errors import ConfigError, EngineError

FAKE = r"""#!/bin/sh
echo "$*" >> "$FAKE_DIR/asked"
last=$(eval echo \${$#})
case "$*" in
  "context show") echo "${FAKE_CONTEXT:-default}" ;;
  "--context "*" info"*) [ -e "$FAKE_DIR/classic" ] && echo '[["Backing Filesystem","extfs"]]' \
                           || echo '[["driver-type","io.containerd.snapshotter.v1"]]' ;;
  "buildx create "*)
     [ -e "$FAKE_DIR/no-create" ] && {
       echo 'ERROR: failed to resolve reference "docker.io/moby/buildkit"' >&2; exit 1; }
     set -- $*; echo "$4" >> "$FAKE_DIR/builders" ;;
  "context create "*) set -- $*; echo "$3" >> "$FAKE_DIR/contexts" ;;
  "context inspect "*) echo "tcp://127.0.0.1:2375" ;;
  "buildx inspect "*)
     if [ "$last" = "${FAKE_CONTEXT:-default}" ] || grep -qx "$last" "$FAKE_DIR/contexts" 2>/dev/null; then
       printf 'Name:   %s\nDriver: docker\n\nNodes:\nName: %s\nBuildKit version: v0.0.0+unknown\n' "$last" "$last"
     elif grep -qx "$last" "$FAKE_DIR/builders" 2>/dev/null; then
       printf 'Name:   %s\nDriver: %s\n\nNodes:\nBuildKit version: v0.21.1\n' "$last" "$(cat "$FAKE_DIR/driver")"
     else
       echo "ERROR: no builder \"$last\" found" >&2; exit 1
     fi ;;
  "buildx rm "*) exit 0 ;;
  *) exit 3 ;;
esac
"""


@pytest.fixture
def fake(tmp_path, monkeypatch):
    path = tmp_path / "docker"
    path.write_text(FAKE)
    path.chmod(0o755)
    (tmp_path / "driver").write_text("docker-container")
    monkeypatch.setenv("FAKE_DIR", str(tmp_path))
    return engine.DockerClient(str(path), "26.1.5", buildx=True)


def asked(tmp_path: Path) -> list[str]:
    return (tmp_path / "asked").read_text().splitlines()


def env(tmp_path, **extra):
    import os

    return {"PATH": os.environ["PATH"], "FAKE_DIR": str(tmp_path), "DOCKER_CONFIG": str(tmp_path / "cfg"), **extra}


def test_without_a_setting_the_engines_own_builder_is_used(fake, tmp_path):
    builder = builders.resolve_builder(fake, None, "host", trusted=True, env=env(tmp_path))
    assert builder == builders.Builder("default", "docker", "v0.0.0+unknown", "containerd")
    assert builder.cache_export_problem is None
    assert not any(call.startswith(("buildx create", "context create")) for call in asked(tmp_path))
    assert builder.describe() == "default (docker driver, BuildKit v0.0.0+unknown, containerd image store)"


def test_the_current_context_is_the_engines_builder(fake, tmp_path):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text('{"currentContext": "ci"}')
    builder = builders.resolve_builder(fake, None, "host", trusted=False, env=env(tmp_path, FAKE_CONTEXT="ci"))
    assert builder.name == "ci" and builder.driver == "docker"
    assert "context show" not in asked(tmp_path)          # read from the config, as the CLI reads it


@pytest.mark.parametrize("extra, config, expected", [
    ({}, None, "default"),
    ({}, '{"currentContext": "ci"}', "ci"),
    ({"DOCKER_CONTEXT": "other"}, '{"currentContext": "ci"}', "other"),
    # The CLI's own order: DOCKER_HOST means the default context, whatever DOCKER_CONTEXT says.
    ({"DOCKER_HOST": "unix:///x.sock", "DOCKER_CONTEXT": "other"}, '{"currentContext": "ci"}', "default"),
    ({}, '{"currentContext": ""}', "default"),
])
def test_the_current_context_follows_the_clis_rules(fake, tmp_path, extra, config, expected):
    if config is not None:
        (tmp_path / "cfg").mkdir()
        (tmp_path / "cfg" / "config.json").write_text(config)
    assert builders.current_context(fake, env(tmp_path, **extra)) == expected
    assert not (tmp_path / "asked").exists()


def test_an_unreadable_config_leaves_the_current_context_to_the_cli(fake, tmp_path):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "config.json").write_text("{not json")
    assert builders.current_context(fake, env(tmp_path, FAKE_CONTEXT="ci")) == "ci"
    assert asked(tmp_path) == ["context show"]


def test_the_engines_image_store_is_asked_beside_buildx_inspect(fake, tmp_path):
    """`buildx inspect` here answers only once the image-store question has started: asked one after the
    other, the inspect would fail and the builder be unusable."""
    fake_path = Path(fake.path)
    fake_path.write_text(fake_path.read_text().replace(
        '  "buildx inspect "*)\n',
        '  "buildx inspect "*)\n     for i in 1 2 3 4 5 6 7 8 9 10; do [ -e "$FAKE_DIR/asked-info" ] && break; '
        'sleep 0.2; done\n     [ -e "$FAKE_DIR/asked-info" ] || exit 1\n').replace(
        '  "--context "*" info"*) ', '  "--context "*" info"*) touch "$FAKE_DIR/asked-info"; '))
    builder = builders.resolve_builder(fake, None, "host", trusted=True, env=env(tmp_path))
    assert builder == builders.Builder("default", "docker", "v0.0.0+unknown", "containerd")


def test_the_docker_driver_on_the_classic_store_exports_no_cache(fake, tmp_path):
    (tmp_path / "classic").write_text("")
    builder = builders.resolve_builder(fake, None, "host", trusted=True, env=env(tmp_path))
    assert builder.image_store == "classic"
    assert "containerd image store" in builder.cache_export_problem and "build.builder" in builder.cache_export_problem


@pytest.mark.parametrize("trusted, name", [(True, "ghbuild"), (False, "ghbuild-untrusted")])
def test_github_hosted_runners_get_a_docker_container_builder_per_trust_level(fake, tmp_path, trusted, name):
    hosted = env(tmp_path, RUNNER_ENVIRONMENT="github-hosted")
    builder = builders.resolve_builder(fake, None, "host", trusted=trusted, env=hosted)
    assert (builder.name, builder.driver, builder.buildkit) == (name, "docker-container", "v0.21.1")
    created = [c for c in asked(tmp_path) if c.startswith("buildx create")]
    assert created == [f"buildx create --name {name} --driver docker-container --driver-opt network=host "
                       "--buildkitd-flags --allow-insecure-entitlement network.host --bootstrap"]
    builders.resolve_builder(fake, None, "host", trusted=trusted, env=hosted)     # created once
    assert len([c for c in asked(tmp_path) if c.startswith("buildx create")]) == 1


def test_a_builder_that_cannot_be_created_is_one_line_naming_build_builder(fake, tmp_path):
    (tmp_path / "no-create").write_text("")
    with pytest.raises(EngineError) as caught:
        builders.resolve_builder(fake, None, "host", trusted=True,
                                 env=env(tmp_path, RUNNER_ENVIRONMENT="github-hosted"))
    message = str(caught.value)
    assert "\n" not in message and message.startswith("build.builder is not set, so ghbuild creates the "
                                                      "docker-container builder ghbuild")
    assert 'failed to resolve reference "docker.io/moby/buildkit"' in message
    assert "set build.builder to a builder that exists" in message


def test_a_named_builder_must_exist(fake, tmp_path):
    with pytest.raises(ConfigError, match=r"^build.builder: no buildx builder or docker context named 'nope'"):
        builders.resolve_builder(fake, "nope", "host", trusted=True, env=env(tmp_path))
    (tmp_path / "builders").write_text("mine\n")
    assert builders.resolve_builder(fake, "mine", "host", trusted=True, env=env(tmp_path)).name == "mine"


class Listener:
    """A loopback TCP server answering each connection with `answer` (or closing it at once)."""

    def __init__(self, answer: bytes) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.answer = answer
        self.endpoint = f"tcp://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            while True:
                conn, _ = self.sock.accept()
                with conn:
                    conn.recv(4096)
                    if self.answer:
                        conn.sendall(self.answer)
        except OSError:
            return

    def close(self) -> None:
        self.sock.close()


def test_an_address_where_a_docker_engine_answers_becomes_a_docker_context(fake, tmp_path):
    listener = Listener(b"HTTP/1.1 200 OK\r\nApi-Version: 1.45\r\nContent-Length: 2\r\n\r\nOK")
    try:
        builder = builders.resolve_builder(fake, listener.endpoint, "host", trusted=True, env=env(tmp_path))
    finally:
        listener.close()
    assert builder.name.startswith("ghbuild-engine-") and builder.driver == "docker"
    # buildx reaches another context's own builder only through `docker --context NAME buildx`.
    assert builder.context == builder.name and builder.docker_host == "tcp://127.0.0.1:2375"
    assert f"context create {builder.name} --docker host={listener.endpoint}" in asked(tmp_path)


def test_an_address_where_buildkit_answers_gets_the_remote_driver(fake, tmp_path):
    (tmp_path / "driver").write_text("remote")
    buildkitd = Listener(b"")           # gRPC over HTTP/2: no HTTP/1 answer to /_ping
    try:
        builder = builders.resolve_builder(fake, buildkitd.endpoint, "host", trusted=False, env=env(tmp_path))
    finally:
        buildkitd.close()
    assert (builder.name, builder.driver) == ("ghbuild-remote-untrusted", "remote")
    assert f"buildx create --name ghbuild-remote-untrusted --driver remote {buildkitd.endpoint}" in asked(tmp_path)


def test_an_address_where_nothing_answers_is_named(fake, tmp_path):
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    with pytest.raises(EngineError, match=rf"^build.builder: nothing answers at tcp://127.0.0.1:{port} "):
        builders.resolve_builder(fake, f"tcp://127.0.0.1:{port}", "host", trusted=True, env=env(tmp_path))


# --------------------------------------------------------------------------- the GitHub Actions cache

OLD = builders.Builder("default", "docker", "v0.0.0+unknown", "containerd")
NEW = builders.Builder("ghbuild", "docker-container", "v0.21.1")
V2 = {"ACTIONS_RUNTIME_TOKEN": "t", "ACTIONS_RESULTS_URL": "https://results/", "ACTIONS_CACHE_URL": "https://c/",
      "ACTIONS_CACHE_SERVICE_V2": "True"}
V1 = {"ACTIONS_RUNTIME_TOKEN": "t", "ACTIONS_CACHE_URL": "http://127.0.0.1:1234/"}


def test_versions_are_read_and_an_unknown_one_is_none():
    assert ghacache.version_tuple("v0.13.2") == (0, 13, 2)
    assert ghacache.version_tuple("github.com/docker/buildx 0.13.1+ds1 0.13.1+ds1-3") == (0, 13, 1)
    assert ghacache.version_tuple("v0.0.0+unknown") is None and ghacache.version_tuple("") is None


def test_the_v2_service_needs_a_current_buildkit_and_an_unknown_version_is_not_a_pass():
    assert ghacache.service(V2) == "v2"
    assert ghacache.problem(V2, NEW, "github.com/docker/buildx v0.21.0 abc") is None
    why = ghacache.problem(V2, OLD)
    assert "needs BuildKit >= 0.20" in why and "runs BuildKit v0.0.0+unknown" in why and "not taken as new" in why
    assert "set build.builder" in why
    assert "needs BuildKit >= 0.20" in ghacache.problem(V2, NEW._replace(buildkit="v0.19.9"))
    assert "needs buildx >= 0.21" in ghacache.problem(V2, NEW, "github.com/docker/buildx 0.13.1+ds1 0.13.1+ds1-3")


def test_the_legacy_service_as_act_serves_it_takes_any_buildkit():
    assert ghacache.service(V1) == "v1" and ghacache.problem(V1, OLD) is None
    # A results URL without the v2 switch and with a legacy URL: BuildKit speaks the legacy API.
    assert ghacache.service({**V1, "ACTIONS_RESULTS_URL": "https://results/"}) == "v1"


def test_no_token_or_no_service_is_named():
    assert "ACTIONS_RUNTIME_TOKEN is not in the environment" in ghacache.problem({}, NEW)
    assert "neither ACTIONS_RESULTS_URL nor ACTIONS_CACHE_URL" in ghacache.problem({"ACTIONS_RUNTIME_TOKEN": "t"}, NEW)


ACTIONS = {"GITHUB_ACTIONS": "true", "GITHUB_RUN_ID": "4242"}


@pytest.mark.parametrize("setting", ["shared", "tcp://10.0.0.5:2375", "unix:///run/buildkit/buildkitd.sock"])
@pytest.mark.parametrize("runner", ["github-hosted", "self-hosted"])
def test_an_untrusted_build_in_actions_never_gets_the_named_or_a_remote_builder(fake, tmp_path, setting, runner):
    """build.builder comes from the branch's checkout or the caller's overrides: a remote BuildKit named there would
    receive the job's build (and its registry credentials), a shared one would carry its cache to trusted builds."""
    choice = builders.choose_builder(setting, trusted=False, env={**ACTIONS, "RUNNER_ENVIRONMENT": runner})
    assert choice.kind == "container" and choice.ignored == setting
    builder = builders.resolve_builder(fake, setting, "host", trusted=False,
                                            env=env(tmp_path, RUNNER_ENVIRONMENT=runner, **ACTIONS))
    assert builder.name.startswith("ghbuild-untrusted") and builder.driver == "docker-container"
    assert not any(call.startswith(("context create", "buildx create --name ghbuild-remote"))
                   for call in asked(tmp_path))
    assert not any(call.endswith(f" {setting}") for call in asked(tmp_path) if call.startswith("buildx inspect"))


def test_an_untrusted_build_on_a_self_hosted_runner_gets_a_builder_of_its_own_removed_after_it(fake, tmp_path):
    """A persistent runner's engine is shared by every job on it: an untrusted build gets a docker-container builder
    made for this job alone, never the engine's own BuildKit, and nothing of it (cache, mounts) outlives the job."""
    hosted = env(tmp_path, RUNNER_ENVIRONMENT="self-hosted", **ACTIONS)
    first = builders.resolve_builder(fake, None, "host", trusted=False, env=hosted)
    second = builders.resolve_builder(fake, None, "host", trusted=False, env=hosted)
    assert first.ephemeral and first.name.startswith("ghbuild-untrusted-4242-") and first.name != second.name
    assert first.driver == "docker-container"
    assert builders.remove_builder(fake, first, hosted) is None
    assert f"buildx rm --force {first.name}" in asked(tmp_path)
    trusted = builders.resolve_builder(fake, None, "host", trusted=True, env=hosted)
    assert not trusted.ephemeral and trusted.driver == "docker"      # the engine's own, shared by trusted builds only


def test_outside_github_runners_an_untrusted_build_keeps_the_engines_builder(fake, tmp_path):
    """act (ACT=true) and local use keep the engine's builder. A job inside Actions without RUNNER_ENVIRONMENT
    (GitHub sets it on every runner it runs a job on; an older GitHub Enterprise Server runner may not) counts as
    self-hosted: fail closed."""
    builder = builders.resolve_builder(fake, None, "host", trusted=False, env=env(tmp_path, ACT="true", **ACTIONS))
    assert builder.name == "default" and not builder.ephemeral
    unknown = builders.resolve_builder(fake, None, "host", trusted=False, env=env(tmp_path, **ACTIONS))
    assert unknown.ephemeral and unknown.name.startswith("ghbuild-untrusted-4242-")
    created = [c for c in asked(tmp_path) if c.startswith(f"buildx create --name {unknown.name}")]
    assert created and "--driver-opt network=bridge" in created[0]     # never the host's network
    named = builders.choose_builder("shared", trusted=False, env={"GITHUB_RUN_ID": "1"})
    assert named.kind == "named" and named.ignored is None          # outside Actions: the developer's own builder
