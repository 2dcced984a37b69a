"""The layer audit's local tag (layer_audit.StageAudit.local_tag): built from the config's image name, a
Dockerfile stage and the arch, it stays a valid reference under ghbuild.local/audit whatever a branch's
ghbuild.toml names (the config refuses image names with ':' or '/'), so no build can steer it elsewhere."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ghbuild.build import layer_audit
from ghbuild.naming import split_reference


@pytest.mark.parametrize("image, stage, arch", [("cpu", "cpp", "amd64"), ("a-b_c", "build.v2", "arm64")])
def test_the_local_tag_is_one_repository_under_ghbuild_local(image, stage, arch):
    audit = object.__new__(layer_audit.StageAudit)
    audit.stage_name = stage
    tag = audit.local_tag(SimpleNamespace(job=SimpleNamespace(image=image, arch=arch)))
    host, name, ref = split_reference(tag)
    assert (host, name, ref) == ("ghbuild.local", f"audit/{image}", f"{stage}-{arch}")


def test_a_config_cannot_name_an_image_that_would_leave_it(tmp_path):
    from ghbuild.config import configfile
    from ghbuild.errors import ConfigError

    for name in ("Evil:x", "../x", "a/b"):
        (tmp_path / "ghbuild.toml").write_text(f'[images."{name}"]\ndockerfile = "Dockerfile"\n')
        (tmp_path / "Dockerfile").write_text("FROM scratch\n")
        with pytest.raises(ConfigError):
            configfile.load(str(tmp_path / "ghbuild.toml"), env={}, cwd=tmp_path)
