"""The setup action trims botocore's service models to the ones ghbuild and botocore's credential chain call."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Stated here, not read from setup.py: ghbuild's clients (S3 for sccache, ECR and ECR Public logins) and the
# ones botocore's credential providers create (assume-role and web identity, SSO profiles, login profiles).
NEEDED = ("s3", "ecr", "ecr-public", "sts", "sso", "sso-oidc", "signin")
SETUP_PY = Path(__file__).resolve().parents[1] / ".github" / "actions" / "setup" / "setup.py"


def setup_module_():
    spec = importlib.util.spec_from_file_location("ghbuild_setup_action_trim", SETUP_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_trimmed_botocore_still_makes_every_client_ghbuild_and_its_credential_chain_need(tmp_path):
    botocore = pytest.importorskip("botocore")
    pytest.importorskip("boto3")
    setup = setup_module_()
    # A venv layout with a copy of the installed botocore (trimming edits it) next to the real boto3.
    site = tmp_path / "venv" / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    site.mkdir(parents=True)
    shutil.copytree(Path(botocore.__file__).parent, site / "botocore", ignore=shutil.ignore_patterns("__pycache__"))
    data = site / "botocore" / "data"
    before = {p.name for p in data.iterdir() if p.is_dir()}
    assert "ec2" in before and "s3" in before

    removed = setup.trim_botocore(tmp_path / "venv")

    after = {p.name for p in data.iterdir() if p.is_dir()}
    assert after == before & setup.BOTOCORE_SERVICES and removed == len(before - after) > 100
    assert (data / "endpoints.json").is_file() and (data / "_retry.json").is_file()
    services = [name for name in NEEDED if name in before]   # signin: botocore 1.40 and later
    assert {"s3", "ecr", "sts", "sso", "sso-oidc"} <= set(services)
    code = ("import sys, boto3, botocore, botocore.exceptions\n"
            f"assert botocore.__file__.startswith({str(site)!r}), botocore.__file__\n"
            "session = boto3.session.Session(region_name='us-east-1', aws_access_key_id='k',"
            " aws_secret_access_key='s')\n"
            "for name in sys.argv[1:]:\n"
            "    session.client(name, endpoint_url='http://127.0.0.1:9')\n"
            "try:\n"
            "    session.client('ec2')\n"
            "except botocore.exceptions.UnknownServiceError as exc:\n"
            "    print('refused:', exc)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path[1:]])}
    proc = subprocess.run([sys.executable, "-c", code, *services], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    # A model removed by mistake fails loudly, naming the service.
    assert "refused: Unknown service: 'ec2'" in proc.stdout, proc.stdout


def test_trimming_an_environment_without_botocore_does_nothing(tmp_path):
    (tmp_path / "venv" / "lib" / "python3.12" / "site-packages" / "requests").mkdir(parents=True)
    assert setup_module_().trim_botocore(tmp_path / "venv") == 0
    assert (tmp_path / "venv" / "lib" / "python3.12" / "site-packages" / "requests").is_dir()


def test_precompile_compiles_the_environment_s_packages_not_a_folder_of_the_same_name_here(tmp_path, monkeypatch):
    """The install byte-compiles the environment's own ghbuild (so the cached environment starts without
    compiling), also when the job's working directory is a checkout holding a `ghbuild/` folder."""
    import venv

    setup = setup_module_()
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    (site / "ghbuild").mkdir()
    for name in ("__init__.py", "publish.py"):
        (site / "ghbuild" / name).write_text("VALUE = 1\n")
    checkout = tmp_path / "checkout"
    (checkout / "ghbuild").mkdir(parents=True)
    (checkout / "ghbuild" / "__init__.py").write_text("VALUE = 2\n")
    monkeypatch.chdir(checkout)
    monkeypatch.setenv("PYTHONPATH", str(checkout))     # a step's env: cannot point the compile elsewhere either
    setup.precompile(env_dir / "bin" / "python")
    compiled = sorted(p.name.split(".")[0] for p in (site / "ghbuild" / "__pycache__").glob("*.pyc"))
    assert compiled == ["__init__", "publish"]
    assert not (checkout / "ghbuild" / "__pycache__").exists()
