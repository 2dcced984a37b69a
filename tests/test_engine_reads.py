"""Reading a built image: one Docker SDK client per environment, made while the build runs."""

from __future__ import annotations

import threading

from ghbuild.build import images


def test_one_sdk_client_per_environment_made_once_even_from_two_threads(monkeypatch):
    """Making a client asks the engine its API version (a round trip); a build reads its image two or three
    times, and the client is made beside the build on another thread (images.warm)."""
    made: list[dict] = []
    gate = threading.Event()

    def new_client(env, timeout):
        made.append(dict(env))
        gate.wait(5)
        return object()

    monkeypatch.setattr(images, "_clients", {})
    monkeypatch.setattr(images, "_new_client", new_client)
    env = {"DOCKER_HOST": "unix:///run/docker.sock"}
    warming = threading.Thread(target=images.warm, args=(env,))
    warming.start()
    reader = threading.Thread(target=images.docker_sdk, args=(dict(env),))
    reader.start()
    gate.set()
    warming.join()
    reader.join()
    assert images.docker_sdk(env) is images.docker_sdk(dict(env)) and len(made) == 1
    other = images.docker_sdk({"DOCKER_HOST": "tcp://127.0.0.1:2376"})
    assert other is not images.docker_sdk(env) and len(made) == 2     # another engine, its own client


def test_a_client_that_cannot_run_is_one_line_not_a_traceback(tmp_path):
    """A build on a local engine runs the client first as the build itself: one that cannot start (a wrong
    architecture, a missing interpreter) is an EngineError naming it."""
    import pytest

    from ghbuild.build import engine
    from ghbuild.errors import EngineError

    broken = tmp_path / "docker"
    broken.write_text("#!/nonexistent/interpreter\n")
    broken.chmod(0o755)
    with pytest.raises(EngineError, match=rf"^cannot run {broken}: No such file or directory$"):
        engine.run_streaming([str(broken), "buildx", "build", "."], {}, tmp_path / "build.log")


def test_a_local_engines_image_is_read_through_its_socket_without_the_sdk(tmp_path, monkeypatch):
    """buildx's iidfile holds the config digest (the classic store's id); the containerd store knows the image by
    its manifest digest: the first candidate the engine has is the id. Its history comes oldest first."""
    import pytest
    from fakes.engine_socket import EngineSocket

    from ghbuild.errors import EngineError

    config, manifest = "sha256:" + "c" * 64, "sha256:" + "m" * 64
    history = [{"Id": manifest, "CreatedBy": "RUN b", "Size": 20}, {"Id": "<missing>", "CreatedBy": "FROM a",
                                                                      "Size": 10}]
    routes = {f"/images/{manifest}/json": (200, {"Id": manifest}), f"/images/{manifest}/history": (200, history),
              "/images/127.0.0.1:5000/app:broken/json": (500, {"message": "content digest not found"})}
    monkeypatch.setattr(images, "docker_sdk", lambda *a: pytest.fail("the SDK was used"))
    with EngineSocket(tmp_path / "docker.sock", routes) as engine:
        env = {"DOCKER_HOST": engine.url}
        assert images.local_image_id(env, [config, "", manifest]) == manifest
        assert images.image_history(env, manifest) == history[::-1]
        assert images.local_image_id(env, [config]) is None
        with pytest.raises(EngineError, match=r"^docker image inspect 127\.0\.0\.1:5000/app:broken: content "
                                              r"digest not found$"):
            images.local_image_id(env, ["127.0.0.1:5000/app:broken"])
    assert engine.asked[:3] == [f"/images/{config}/json", f"/images/{manifest}/json", f"/images/{manifest}/history"]
    with pytest.raises(EngineError, match=r"^docker history x: the Docker engine at unix://\S+ does not answer"):
        images.image_history({"DOCKER_HOST": engine.url}, "x")


def test_no_ref_that_is_not_an_image_reference_reaches_the_engine_api(tmp_path):
    """The refs read come from buildx's files and the plan's tags, which the config validates; at the engine's
    edge too, nothing that is not an image reference becomes part of a URL: `..`, `?` or `%2f` would reach
    another endpoint of the engine (its containers, its secrets) with the runner's access."""
    import pytest
    from fakes.engine_socket import EngineSocket

    from ghbuild import naming
    from ghbuild.errors import EngineError

    good = ["sha256:" + "a" * 64, "127.0.0.1:5000/x/app:abc-x86_64", "127.0.0.1:5000/x/app@sha256:" + "b" * 64,
            "debian", "localhost:5000/a/b"]
    bad = ["127.0.0.1:5000/../../containers/json", "127.0.0.1:5000/x/app:t?all=1", "x%2f..%2fsecrets",
           "127.0.0.1:5000/x/app:../../info", "", "APP/x:t", "x/app:t/../../../containers"]
    assert [naming.is_image_reference(r) for r in good] == [True] * len(good)
    assert [naming.is_image_reference(r) for r in bad] == [False] * len(bad)
    with EngineSocket(tmp_path / "docker.sock", {}) as engine:
        env = {"DOCKER_HOST": engine.url}
        for ref in bad[:4]:
            with pytest.raises(EngineError, match="is not an image reference"):
                images.local_image_id(env, [ref])
            with pytest.raises(EngineError, match="is not an image reference"):
                images.image_history(env, ref)
    assert engine.asked == []
    tcp = {"DOCKER_HOST": "tcp://127.0.0.1:9"}            # an engine the SDK reads: refused before it too
    with pytest.raises(EngineError, match="is not an image reference"):
        images.local_image_id(tcp, ["sha256:" + "a" * 64, bad[0]])
    with pytest.raises(EngineError, match="is not an image reference"):
        images.image_history(tcp, bad[1])
