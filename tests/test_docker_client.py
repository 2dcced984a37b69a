"""Which docker client builds: the choice among clients on the machine, from what each one answers."""

from __future__ import annotations

import os
from pathlib import Path

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
    return {"PATH": str(tmp_path / "empty"), "HOME": str(tmp_path), "GHBUILD_DOCKER_CLI": path, **extra}


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
    """A 26.x client that answers the context questions too: `--context C info --format ...` (client version,
    the engine's, its storage) and `buildx inspect C`."""
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


def test_the_preferred_client_answers_the_builders_questions_instead_of_the_classic_ones(tmp_path):
    from ghbuild.build import builders

    path = context_docker(tmp_path / "a", "26.1.5")
    env = env_with(path, tmp_path, DOCKER_CONFIG=str(tmp_path / "cfg"))
    with engine.ClientProbe(env) as probe:
        client = probe.client()
        answered = probe.answers[path]
    assert client == engine.DockerClient(path, "26.1.5", True) and answered.context == "default"
    asked = (tmp_path / "a" / "asked").read_text()
    assert "--context default info --format {{.ClientInfo.Version}}" in asked and "buildx inspect default" in asked
    assert "version --format" not in asked and "buildx version" not in asked
    builder = builders.resolve_builder(client, None, "host", trusted=True, env=env, answered=answered)
    assert builder == builders.Builder("default", "docker", "v0.13.2", "containerd")
    assert (tmp_path / "a" / "asked").read_text() == asked      # nothing asked again


@pytest.mark.parametrize("server, inspect_ok, why", [
    ("", True, r"engine not reachable \(Cannot connect to the Docker daemon"),
    ("26.1.5", False, "has no buildx plugin"),
])
def test_bad_context_answers_are_asked_again_the_classic_way_for_the_reason(tmp_path, server, inspect_ok, why):
    path = context_docker(tmp_path / "a", server, inspect_ok)
    env = env_with(path, tmp_path, DOCKER_CONFIG=str(tmp_path / "cfg"), DOCKER_HOST=f"unix://{tmp_path}/none.sock")
    with pytest.raises(EngineError, match=why):
        engine.ClientProbe({**env, "PATH": str(tmp_path / "empty")}).client()
    assert "version --format" in (tmp_path / "a" / "asked").read_text()
