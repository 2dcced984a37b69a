"""infra's env files: local.env for this checkout, services.env for any other repository."""

from __future__ import annotations

import subprocess

from infra import localenv

VALUES = {
    "GHBUILD_CONFIG": "/src/ghbuild/ghbuild.toml",
    "GHBUILD_REGISTRIES_STAGING": "127.0.0.1:5000/ghbuild/{image}",
    "GHBUILD_IMAGES_ROCM_BASE_BASE_IMAGE": "127.0.0.1:5000/standin:1",
    "GHBUILD_SCCACHE_BUCKET": "sccache",
    "GHBUILD_SCCACHE_HELPER_IMAGE": "127.0.0.1:5000/ghbuild/ghbuild-sccache:1",
    "AWS_SECRET_ACCESS_KEY": "it's fake",
    "DOCKER_HOST": "unix:///run/ghbuild/docker.sock",
}


def test_services_env_leaves_out_this_checkouts_config_repositories_and_images(tmp_path, monkeypatch):
    monkeypatch.setattr(localenv, "state_dir", lambda: tmp_path)
    assert localenv.write(VALUES) == tmp_path / "local.env"
    assert localenv.read(tmp_path / "local.env") == VALUES
    services = localenv.read(tmp_path / "services.env")
    assert set(services) == {"GHBUILD_SCCACHE_BUCKET", "GHBUILD_SCCACHE_HELPER_IMAGE", "AWS_SECRET_ACCESS_KEY",
                             "DOCKER_HOST"}
    # A shell reads the same values (quoting).
    out = subprocess.run(["sh", "-c", f"set -a; . {tmp_path}/services.env; set +a; env"], capture_output=True,
                         text=True, env={"PATH": "/usr/bin:/bin"}, check=True).stdout.splitlines()
    assert "AWS_SECRET_ACCESS_KEY=it's fake" in out and not any(line.startswith("GHBUILD_CONFIG=") for line in out)
