"""The start of a build (buildjob._start): the builder's questions go to the preferred client before its own
answers are in, and are asked again of the client chosen when the preferred one is passed over."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ghbuild.build import buildjob, engine, sccache
from ghbuild.errors import EngineError


class Probe:
    def __init__(self, preferred: str, chosen: str | None, context: str | None = None):
        self.preferred, self.chosen, self.context = preferred, chosen, context
        self.answers: dict[str, engine.EngineBuilderAnswer] = {}

    def client(self, backend=None) -> engine.DockerClient:
        if self.chosen is None:
            raise EngineError("no usable docker client: /a: engine not reachable")
        if self.context is not None:
            self.answers[self.chosen] = engine.EngineBuilderAnswer(self.context, "containerd", "26.1.5")
        return engine.DockerClient(self.chosen, "26.1.5", True)


@pytest.fixture
def asked(monkeypatch):
    paths: list[str] = []

    def builder(client, options, trusted, env, dry_run, answered=None):
        paths.append(client.path + (f" answered of {answered.context}" if answered else ""))
        return SimpleNamespace(name=f"on {client.path}"), None

    monkeypatch.setattr(buildjob, "_builder", builder)
    monkeypatch.setattr(buildjob, "_credentials_refusal", lambda plan: None)
    monkeypatch.setattr(sccache, "preflight", lambda options, refusal, env: "decided")
    return paths


def start(probe):
    plan = SimpleNamespace(trust=SimpleNamespace(trusted=True))
    options = SimpleNamespace(build=SimpleNamespace(builder=None), sccache=None)
    return buildjob._start(plan, options, SimpleNamespace(dry_run=False, backend=None), {}, probe)


def test_the_builder_is_asked_of_the_preferred_client_once(asked):
    client, decision, builder, _ = start(Probe("/a", "/a"))
    assert (client.path, decision, builder.name, asked) == ("/a", "decided", "on /a", ["/a"])


def test_a_passed_over_preferred_clients_builder_answer_is_not_used(asked):
    client, _, builder, _ = start(Probe("/a", "/b"))
    assert client.path == "/b" and builder.name == "on /b" and asked == ["/a", "/b"]


def test_no_usable_client_is_the_error_whatever_the_early_builder_answered(asked):
    with pytest.raises(EngineError, match="no usable docker client"):
        start(Probe("/a", None))


def test_the_engines_own_builder_is_described_by_the_probes_answers_not_asked_early(asked):
    client, _, builder, _ = start(Probe("/a", "/a", context="default"))
    assert client.path == "/a" and builder.name == "on /a" and asked == ["/a answered of default"]


def test_a_named_builder_is_asked_early_whatever_the_probe_heard_of_the_context(asked, monkeypatch):
    from ghbuild.build import builders

    monkeypatch.setattr(builders, "choose_builder", lambda *a: builders.BuilderChoice("named", "remote-one"))
    start(Probe("/a", "/a", context="default"))
    assert asked == ["/a"]


def test_the_buildkit_version_is_asked_before_the_build_only_when_the_gha_v2_cache_needs_it(monkeypatch):
    """The engine's own builder comes from the probe without its BuildKit version (the report names the engine's
    version): asked before the build only where the GitHub Actions cache service v2 gates on it."""
    from ghbuild.build import builders

    engines_own = builders.Builder("default", "docker", None, "containerd")
    monkeypatch.setattr(builders, "resolve_builder", lambda *a: engines_own)
    monkeypatch.setattr(builders, "with_buildkit", lambda client, builder, env: builder._replace(buildkit="v0.13.2"))
    options = SimpleNamespace(build=SimpleNamespace(builder=None, builder_network="host"))
    client = engine.DockerClient("/a", "26.1.5", True)

    def version(env):
        return buildjob._builder(client, options, True, env, False)[0].buildkit

    assert version({}) is None
    assert version({"ACTIONS_RUNTIME_TOKEN": "t", "ACTIONS_CACHE_URL": "http://act/"}) is None        # v1: no gate
    assert version({"ACTIONS_RUNTIME_TOKEN": "t", "ACTIONS_RESULTS_URL": "https://results/"}) == "v0.13.2"
