"""Which docker client builds: the choice among clients on the machine, from what each one answers."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from ghbuild.build import engine
from ghbuild.errors import EngineError


def fake_docker(folder: Path, name: str, client: str, server: str | None, buildx: bool) -> str:
    """A docker CLI answering `--version`, `version --format` (client line, then the server's or nothing, exit 1
    without an engine, as the real CLI does) and `buildx version`; every call is appended to <folder>/asked."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    server_part = (f'printf "%s\\n%s\\n" "{client}" "{server}"' if server else
                   f'printf "%s\\n\\n" "{client}"; '
                   'echo "Cannot connect to the Docker daemon at unix:///x.sock" >&2; exit 1')
    buildx_part = ('echo "github.com/docker/buildx v0.19.0"' if buildx else
                   'echo "docker: buildx is not a docker command" >&2; exit 1')
    path.write_text(f"""#!/bin/sh
echo "$*" >> "{folder}/asked"
case "$1" in
  --version) echo "Docker version {client}, build 0123abc" ;;
  version) case "$3" in *Client.Version*Server*) {server_part} ;; *) echo "unexpected format $3" >&2; exit 2 ;; esac ;;
  buildx) {buildx_part} ;;
  *) exit 3 ;;
esac
""")
    path.chmod(0o755)
    return str(path)


def env_with(path: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    # An engine the fake client answers for: one on a unix socket (the machine's own, by default) would be
    # asked directly (engine.SocketInfo).
    return {"PATH": str(tmp_path / "empty"), "HOME": str(tmp_path), "GHBUILD_DOCKER_CLI": path,
            "DOCKER_HOST": "tcp://127.0.0.1:9", **extra}


def test_a_client_with_buildx_builds_with_buildx(tmp_path):
    path = fake_docker(tmp_path / "a", "docker", "28.2.2", "28.2.2", buildx=True)
    client = engine.find_client(env_with(path, tmp_path))
    assert client == engine.DockerClient(path=path, version="28.2.2", buildx=True)
    assert client.backend == "buildx"


def test_a_client_without_buildx_is_passed_over_with_the_reason(tmp_path):
    """Every build is `docker buildx build`: a client without the plugin (bookworm's 20.10, a 28.x CLI alone)
    is passed over for one that has it, and when none has it the error says what to install."""
    old = fake_docker(tmp_path / "a", "docker", "20.10.24+dfsg1", "26.1.5", buildx=False)
    new = fake_docker(tmp_path / "b", "docker", "26.1.5", "26.1.5", buildx=True)
    # DOCKER_HOST to nowhere: the machine's own /usr/bin/docker (the last candidate) cannot be chosen instead.
    nowhere = f"unix://{tmp_path}/none.sock"
    env = {**env_with(old, tmp_path, DOCKER_HOST=nowhere), "PATH": str(tmp_path / "b")}
    client = engine.find_client(env)
    assert (client.path, client.version, client.backend) == (new, "26.1.5", "buildx")
    with pytest.raises(EngineError) as caught:
        engine.find_client({**env, "PATH": str(tmp_path / "empty")})
    assert str(caught.value).startswith(f"no usable docker client: {old}: client 20.10.24+dfsg1 has no buildx plugin "
                                        "(ghbuild builds with `docker buildx build`: install the plugin")


def test_an_unreachable_engine_is_named_with_the_clients_own_words(tmp_path):
    path = fake_docker(tmp_path / "a", "docker", "28.2.2", None, buildx=True)
    with pytest.raises(EngineError) as caught:
        # Nothing listens there, so /usr/bin/docker (the last fallback), where installed, cannot reach one either.
        engine.find_client(env_with(path, tmp_path, DOCKER_HOST=f"unix://{tmp_path}/none.sock"))
    message = str(caught.value)
    assert message.startswith("no usable docker client: ") and "\n" not in message
    assert f"{path}: engine not reachable (Cannot connect to the Docker daemon at unix:///x.sock)" in message



def plugin(folder: Path, executable: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "docker-buildx"
    path.write_text(f"#!/bin/sh\necho \"$*\" >> {folder}/plugin-ran\necho buildx\n")   # run by no dry run
    path.chmod(0o755 if executable else 0o644)
    return path


def test_a_dry_run_asks_no_engine_and_finds_buildx_where_the_cli_would(tmp_path):
    """engine=False: each client is asked only `--version`; buildx is the plugin in the config folder's
    cli-plugins (DOCKER_CONFIG), as the CLI finds it, and the engine's state does not matter."""
    path = fake_docker(tmp_path / "a", "docker", "28.2.2", None, buildx=False)   # no engine, no `buildx` answer
    env = env_with(path, tmp_path, DOCKER_CONFIG=str(tmp_path / "conf"), DOCKER_HOST=f"unix://{tmp_path}/none.sock")
    with pytest.raises(EngineError, match="engine not reachable"):
        engine.find_client(env)
    (tmp_path / "a" / "asked").unlink()
    plugin(tmp_path / "conf" / "cli-plugins")
    with engine.ClientProbe(env, engine=False) as probe:
        client = probe.client()
    assert client == engine.DockerClient(path=path, version="28.2.2", buildx=True)
    assert (tmp_path / "a" / "asked").read_text().splitlines() == ["--version"]
    assert not (tmp_path / "conf" / "cli-plugins" / "plugin-ran").exists()


def test_a_dry_run_without_a_buildx_plugin_names_it(tmp_path, monkeypatch):
    new = fake_docker(tmp_path / "a", "docker", "28.2.2", "28.2.2", buildx=True)   # answers `buildx`: not asked
    env = {**env_with(new, tmp_path, DOCKER_CONFIG=str(tmp_path / "conf")), "PATH": str(tmp_path / "empty")}
    plugin(tmp_path / "conf" / "cli-plugins", executable=False)      # the CLI runs no plugin it cannot execute
    monkeypatch.setattr(engine, "SYSTEM_PLUGIN_DIRS", ())   # not the machine's own plugin
    with pytest.raises(EngineError, match=rf"no usable docker client: {new}: client 28.2.2 has no buildx plugin"):
        engine.ClientProbe(env, engine=False).client()


def test_the_plugin_folders_are_the_clis_own_in_its_order(tmp_path):
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "config.json").write_text('{"cliPluginsExtraDirs": ["/opt/extra", 7, ""]}')
    env = {"DOCKER_CONFIG": str(conf), "HOME": str(tmp_path)}
    assert engine.plugin_dirs(env) == ["/opt/extra", str(conf / "cli-plugins"),
                                              *engine.SYSTEM_PLUGIN_DIRS]
    (conf / "config.json").write_text("{not json")
    assert engine.plugin_dirs({"HOME": str(tmp_path)})[0] == str(tmp_path / ".docker" / "cli-plugins")
    assert engine.plugin_dirs(env)[0] == str(conf / "cli-plugins")
    (conf / "config.json").unlink()
    os.mkfifo(conf / "config.json")      # read by nobody: a FIFO would hang the run
    assert engine.plugin_dirs(env)[0] == str(conf / "cli-plugins")
    (conf / "config.json").unlink()
    extra = tmp_path / "extra"
    found = plugin(extra)
    (conf / "config.json").write_text(f'{{"cliPluginsExtraDirs": ["{extra}"]}}')
    plugin(conf / "cli-plugins")
    assert engine.buildx_plugin(env) == str(found)        # the first folder wins, as in the CLI


def test_a_client_whose_version_banner_is_unreadable_is_passed_over_in_a_dry_run(tmp_path):
    odd = tmp_path / "odd" / "docker"
    odd.parent.mkdir()
    odd.write_text("#!/bin/sh\necho 'hello'\n")
    odd.chmod(0o755)
    probe = engine.ClientProbe(env_with(str(odd), tmp_path), engine=False)
    try:
        chosen = probe.client()
    except EngineError as exc:
        assert f"{odd}: `--version` printed no version: 'hello'" in str(exc)
    else:      # the machine's own /usr/bin/docker, the last fallback, where installed
        assert chosen.path == "/usr/bin/docker" and chosen.version


def test_build_asks_the_clients_first_and_leaves_none_running_after_a_config_error(tmp_path):
    """`build` starts the client probe before it reads the config (the clients answer while it plans); when the
    config then fails, the run ends at once with the config error and no client process outlives it."""
    import os
    import subprocess
    import sys
    import time

    slow = tmp_path / "bin" / "docker"
    slow.parent.mkdir()
    pids = tmp_path / "pids"
    slow.write_text(f'#!/bin/sh\necho $$ >> {pids}\nexec sleep 30\n')
    slow.chmod(0o755)
    (tmp_path / "ghbuild.toml").write_text('[images.app]\ndockerfile = "missing/Dockerfile"\n')
    env = {**os.environ, "PATH": f"{slow.parent}:/usr/bin:/bin", "GHBUILD_DOCKER_CLI": str(slow)}
    env = {k: v for k, v in env.items() if not k.startswith("GITHUB_")}
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "ghbuild", "build", "--image", "app", "--arch", "amd64",
                             "--dry-run", "--event", "push", "--repository", "o/r", "--ref", "main",
                             "--default-branch", "main", "--sha", "0" * 40],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert time.monotonic() - start < 10
    assert result.returncode == 3 and "missing/Dockerfile" in result.stderr, result.stderr
    started = [int(p) for p in pids.read_text().split()] if pids.exists() else []
    assert started, "the probe was not started before the config was read"
    for pid in started:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower() \
            or "(Z)" in Path(f"/proc/{pid}/stat").read_text(), f"client process {pid} still running"


def test_only_the_preferred_client_is_asked_when_it_can_build(tmp_path):
    """Each client run costs CPU a build's start would share: another candidate is asked only when the
    preferred one is passed over."""
    preferred = fake_docker(tmp_path / "a", "docker", "26.1.5", "26.1.5", buildx=True)
    other = fake_docker(tmp_path / "b", "docker", "26.1.5", "26.1.5", buildx=True)
    env = {**env_with(preferred, tmp_path), "PATH": str(tmp_path / "b")}
    with engine.ClientProbe(env) as probe:
        assert probe.preferred == preferred
        assert probe.client().path == preferred
    assert (tmp_path / "a" / "asked").exists() and not (tmp_path / "b" / "asked").exists()
    old = fake_docker(tmp_path / "c", "docker", "20.10.24", "26.1.5", buildx=False)
    assert engine.find_client({**env_with(old, tmp_path), "PATH": str(tmp_path / "b")}).path == other


def context_docker(folder: Path, server: str, inspect_ok: bool = True) -> str:
    """A 26.x client that answers the context question too: `--context C info --format ...` (client version,
    the engine's, its storage), and `buildx inspect C`."""
    path = Path(fake_docker(folder, "docker", "26.1.5", server or None, buildx=inspect_ok))
    inspect = ("printf 'Name: %s\\nDriver: docker\\nBuildKit version: v0.13.2\\n' \"$3\"; exit 0" if inspect_ok
               else "exit 1")
    status = '[["driver-type","io.containerd.snapshotter.v1"]]'
    text = path.read_text().replace('case "$1" in\n', f'''case "$1" in
  --context) [ "$3" = info ] && {{ printf '26.1.5\\n%s\\n%s\\n' "{server}" '{status}'; exit 0; }} ;;
''').replace("  buildx) ", f'''  buildx) [ "$2" = inspect ] && {{ {inspect}; }};
     ''')
    path.write_text(text)
    return str(path)


def plugin_env(monkeypatch, tmp_path: Path, path: str, plugin: bool, **extra: str) -> dict[str, str]:
    """The environment of a fake client whose buildx plugin is (or is not) where the CLI looks: the config
    folder's cli-plugins, the machine's own folders left out."""
    monkeypatch.setattr(engine, "SYSTEM_PLUGIN_DIRS", ())
    config = tmp_path / "cfg"
    if plugin:
        (config / "cli-plugins").mkdir(parents=True)
        (config / "cli-plugins" / "docker-buildx").write_text("#!/bin/sh\n")
        (config / "cli-plugins" / "docker-buildx").chmod(0o755)
    return env_with(path, tmp_path, DOCKER_CONFIG=str(config), **extra)


def test_the_preferred_client_answers_the_builders_question_instead_of_the_classic_ones(tmp_path, monkeypatch):
    """The engine's own builder needs one question (`info`: the engine answers, its version, its image store)
    and the plugin on disk; its BuildKit version, which only the GitHub cache gate reads, when asked for."""
    from ghbuild.build import builders

    path = context_docker(tmp_path / "a", "26.1.5")
    env = plugin_env(monkeypatch, tmp_path, path, plugin=True)
    with engine.ClientProbe(env) as probe:
        client = probe.client()
        answered = probe.answers[path]
    assert client == engine.DockerClient(path, "26.1.5", True) and answered.context == "default"
    asked = (tmp_path / "a" / "asked").read_text()
    # One question, no plugin run (the fake's `echo` turns the format's \\n into new lines).
    assert asked == f"--context default info --format {engine._INFO_FORMAT}\n".replace("\\n", "\n")
    builder = builders.resolve_builder(client, None, "host", trusted=True, env=env, answered=answered)
    assert builder == builders.Builder("default", "docker", None, "containerd", engine="26.1.5")
    assert builder.describe() == "default (docker driver, the BuildKit of engine 26.1.5, containerd image store)"
    assert (tmp_path / "a" / "asked").read_text() == asked      # nothing asked again
    assert builders.with_buildkit(client, builder, env) == builder._replace(buildkit="v0.13.2")
    assert (tmp_path / "a" / "asked").read_text() == asked + "buildx inspect default\n"


def test_a_builder_that_does_not_say_its_version_is_reported_unknown(tmp_path, monkeypatch):
    from ghbuild.build import builders

    path = context_docker(tmp_path / "a", "26.1.5", inspect_ok=False)
    env = plugin_env(monkeypatch, tmp_path, path, plugin=True)
    builder = builders.Builder("default", "docker", None, "containerd")
    answered = builders.with_buildkit(engine.DockerClient(path, "26.1.5", True), builder, env)
    assert answered.buildkit == "" and "BuildKit unknown" in answered.describe()


@pytest.mark.parametrize("server, plugin, why", [
    ("", True, r"engine not reachable \(Cannot connect to the Docker daemon"),
    ("26.1.5", False, "has no buildx plugin"),
])
def test_bad_context_answers_are_asked_again_the_classic_way_for_the_reason(tmp_path, monkeypatch, server, plugin,
                                                                           why):
    path = context_docker(tmp_path / "a", server, inspect_ok=plugin)
    env = plugin_env(monkeypatch, tmp_path, path, plugin, DOCKER_HOST=f"unix://{tmp_path}/none.sock")
    with pytest.raises(EngineError, match=why):
        engine.ClientProbe({**env, "PATH": str(tmp_path / "empty")}).client()
    assert "version --format" in (tmp_path / "a" / "asked").read_text()


@pytest.fixture
def engine_socket(tmp_path):
    """A Docker engine API on a unix socket answering `GET /info` as dockerd does (the requests kept)."""
    from fakes.engine_socket import EngineSocket

    info = {"ServerVersion": "26.1.5+dfsg1", "Driver": "overlayfs",
            "DriverStatus": [["driver-type", "io.containerd.snapshotter.v1"]]}
    with EngineSocket(tmp_path / "docker.sock", {"/info": (200, info)}) as engine:
        yield SimpleNamespace(path=str(engine.path), asked=engine.asked, info=info)


def test_the_engine_behind_a_local_socket_is_asked_directly_not_through_the_client(tmp_path, monkeypatch,
                                                                                     engine_socket):
    """`docker info` is a Go client that first runs every plugin's metadata command; the engine on the default
    context's unix socket answers the same question (`GET /info`) itself, and the client is not run at all."""
    path = context_docker(tmp_path / "a", "26.1.5")
    env = plugin_env(monkeypatch, tmp_path, path, plugin=True, DOCKER_HOST=f"unix://{engine_socket.path}")
    with engine.ClientProbe(env) as probe:
        assert probe.client() == engine.DockerClient(path, "", True)
        assert probe.answers[path] == engine.EngineBuilderAnswer("default", "containerd", "26.1.5+dfsg1")
    assert engine_socket.asked == ["/info"] and not (tmp_path / "a" / "asked").exists()
    engine_socket.info["DriverStatus"] = [["Backing Filesystem", "extfs"]]     # the classic store, overlay2
    with engine.ClientProbe(env) as probe:
        probe.client()
        assert probe.answers[path].image_store == "classic"


def test_a_socket_engine_without_the_plugin_on_disk_is_asked_again_the_classic_way(tmp_path, monkeypatch,
                                                                                  engine_socket):
    path = context_docker(tmp_path / "a", "26.1.5", inspect_ok=False)
    env = plugin_env(monkeypatch, tmp_path, path, plugin=False, DOCKER_HOST=f"unix://{engine_socket.path}")
    with pytest.raises(EngineError, match="has no buildx plugin"):
        engine.ClientProbe({**env, "PATH": str(tmp_path / "empty")}).client()
    assert "buildx version" in (tmp_path / "a" / "asked").read_text()


@pytest.mark.parametrize("docker_host, context, socket", [
    (None, "default", engine.DEFAULT_SOCKET),
    ("unix:///run/user/1000/docker.sock", "default", "/run/user/1000/docker.sock"),
    ("tcp://127.0.0.1:2375", "default", None),
    ("ssh://builder@host", "default", None),
    (None, "rootless", None),
])
def test_only_the_default_contexts_unix_socket_is_asked_directly(docker_host, context, socket):
    env = {"DOCKER_HOST": docker_host} if docker_host else {}
    assert engine.engine_socket(env, context) == socket
