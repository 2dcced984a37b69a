"""`runner-check` and `container-flags`: the self-hosted ROCm runner checks, run as the CLI runs them.

Real processes only: fake `rocminfo` and `docker` executables (tests/fakes/rocm_tools.py) first on
PATH that succeed, fail or hang, and a fake filesystem root (--root) holding dev/kfd,
dev/dri/renderD128 and etc/group. Asserted is what a user sees: exit codes, the one line per failure
that says what is wrong and how to fix it, the JSON report, wall time against the timeouts, and that a
killed probe leaves no process behind.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from fakes.rocm_tools import (
    ROCMINFO_2_GPUS,
    ROCMINFO_CPU_ONLY,
    ROCMINFO_ERROR,
    FakeBin,
    clean_env,
    fake_docker,
    run_cli,
    survivors,
)

from ghbuild.runner import bounded, health

IS_ROOT = os.geteuid() == 0
RENDER_GID = 4242 if IS_ROOT else os.getgid()
FLAGS_993 = ("--device /dev/kfd --device /dev/dri --group-add 993 --security-opt seccomp=unconfined "
             "--shm-size 16g --label org.ghbuild.runner=smoke-test")
# Python start-up plus the fakes; generous, but far below the 60 s a hanging fake would take.
SLACK = 4.0


def make_root(base: Path, *, kfd: bool = True, kfd_mode: int = 0o666, group: str | None = f"render:x:{RENDER_GID}:",
              render_devices: dict[str, int] | None = None) -> Path:
    root = base / "root"
    (root / "dev" / "dri").mkdir(parents=True, exist_ok=True)
    (root / "etc").mkdir(exist_ok=True)
    (root / "var" / "lib" / "docker").mkdir(parents=True, exist_ok=True)
    if kfd:
        (root / "dev" / "kfd").write_text("")
        os.chmod(root / "dev" / "kfd", kfd_mode)
        if IS_ROOT:
            os.chown(root / "dev" / "kfd", 0, RENDER_GID)
    for name, gid in (render_devices if render_devices is not None else {"renderD128": RENDER_GID}).items():
        (root / "dev" / "dri" / name).write_text("")
        if IS_ROOT:
            os.chown(root / "dev" / "dri" / name, 0, gid)
    lines = ["root:x:0:", "video:x:44:"] + ([group] if group else [])
    (root / "etc" / "group").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture
def fb(tmp_path) -> FakeBin:
    (tmp_path / "bin").mkdir()
    return FakeBin(tmp_path / "bin")


@pytest.fixture
def healthy(tmp_path, fb):
    """A runner with 2 GPUs, /dev/kfd, a render device, disk, and no containers."""
    fb.ok("rocminfo", ROCMINFO_2_GPUS)
    fake_docker(fb)
    return make_root(tmp_path)


def check_cli(tmp_path, fb, root, *args, env_extra=None, **kw):
    env = clean_env(fb.path, **(env_extra or {}))
    return run_cli(["runner-check", "--root", str(root), "--min-free-disk", "1KB", *args], env, tmp_path, **kw)


def fail_line(res, name: str) -> str:
    lines = [line.strip() for line in res.stderr.splitlines() if line.strip().startswith(f"FAIL  {name}:")]
    assert len(lines) == 1, f"expected one FAIL line for {name}:\n{res.stderr}"
    return lines[0]


def assert_one_error(res, code: int, *needles: str) -> str:
    assert res.returncode == code, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    errors = res.error_lines()
    assert len(errors) == 1, res.stderr
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    return errors[0]


# --------------------------------------------------------------------------- a healthy runner

def test_healthy_runner_passes_and_reports_every_check(tmp_path, fb, healthy):
    res = check_cli(tmp_path, fb, healthy, "--gpus", "2", "--json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["ok"] is True and report["failed"] == []
    checks = {c["name"]: c for c in report["checks"]}
    assert list(checks) == ["gpus", "kfd", "render-gid", "disk", "containers"]
    assert checks["gpus"]["details"]["count"] == 2
    assert checks["gpus"]["details"]["agents"] == ["gfx942", "gfx942"]
    assert checks["render-gid"]["details"] == {"gid": RENDER_GID, "source": "/dev/dri/renderD128"}
    # Free disk is measured on the Docker data root that `docker info` names (under --root).
    assert checks["disk"]["details"]["path"] == str(healthy / "var" / "lib" / "docker")
    assert "ok    gpus: rocminfo sees 2 GPUs (gfx942 x2), need at least 2" in res.stderr
    assert f"ok    render-gid: render gid {RENDER_GID} (from /dev/dri/renderD128)" in res.stderr
    assert fb.calls("rocminfo") == [[]]
    assert ["info", "--format", "{{.DockerRootDir}}"] in fb.calls("docker")


def test_check_from_python_with_injected_edges(tmp_path, fb, healthy):
    """The same checks through the library: Host(root, env, run) are the only edges."""
    env = clean_env(fb.path)
    host = health.Host(root=healthy, env=env, run=bounded.runner(env), docker="docker", cwd=tmp_path)
    report = health.check(gpus=2, min_free_disk="1KB", host=host)
    assert report.ok, report.text()
    assert [c.name for c in report.checks] == ["gpus", "kfd", "render-gid", "disk", "containers"]
    with pytest.raises(ValueError, match="not a size"):
        health.check(min_free_disk="lots", host=host)


# --------------------------------------------------------------------------- gpus

def test_too_few_gpus_is_one_line_with_the_fix(tmp_path, fb, healthy):
    res = check_cli(tmp_path, fb, healthy, "--gpus", "4")
    line = fail_line(res, "gpus")
    assert "rocminfo sees 2 GPUs (gfx942 x2), expected at least 4" in line
    assert "amd-smi list" in line and "dmesg" in line          # how to find out, what to do
    err = assert_one_error(res, 15, "runner check failed", "1 of 5 checks failed: gpus")
    assert err.startswith("ghbuild: runner check failed: ")


def test_cpu_agents_are_not_gpus(tmp_path, fb, healthy):
    fb.ok("rocminfo", ROCMINFO_CPU_ONLY)
    res = check_cli(tmp_path, fb, healthy)
    assert "rocminfo sees 0 GPUs (none), expected at least 1" in fail_line(res, "gpus")
    assert_one_error(res, 15, "gpus")


def test_failing_rocminfo_reports_its_error(tmp_path, fb, healthy):
    fb.fail("rocminfo", ROCMINFO_ERROR, code=1)
    res = check_cli(tmp_path, fb, healthy)
    line = fail_line(res, "gpus")
    assert line.startswith("FAIL  gpus: rocminfo failed (exit 1): Call returned HSA_STATUS_ERROR_OUT_OF_RESOURCES")
    assert "/dev/kfd" in line
    assert_one_error(res, 15, "gpus")


def test_hanging_rocminfo_is_killed_with_its_children(tmp_path, fb, healthy):
    fb.hang("rocminfo")
    res = check_cli(tmp_path, fb, healthy, "--rocminfo-timeout", "1")
    assert res.seconds < 1 + SLACK, f"took {res.seconds:.1f} s with a 1 s rocminfo timeout"
    line = fail_line(res, "gpus")
    assert "rocminfo did not finish within 1 s and was killed" in line and "reboot" in line
    assert_one_error(res, 15, "gpus")
    pids = fb.pids("rocminfo")
    assert len(pids) == 2, pids          # the fake shell and the sleep it started
    assert not survivors(pids), "the process group of the killed rocminfo is still alive"


def test_missing_rocminfo(tmp_path, fb, healthy):
    (fb.path / "rocminfo").unlink()
    res = check_cli(tmp_path, fb, healthy)
    assert "rocminfo not found (not on PATH, not in /opt/rocm/bin)" in fail_line(res, "gpus")


def test_rocminfo_in_opt_rocm_is_found_without_path(tmp_path, fb, healthy):
    """Runner services often lack /opt/rocm/bin on PATH."""
    (fb.path / "rocminfo").unlink()
    opt = healthy / "opt" / "rocm" / "bin"
    opt.mkdir(parents=True)
    script = FakeBin(opt).ok("rocminfo", ROCMINFO_2_GPUS)
    res = check_cli(tmp_path, fb, healthy, "--gpus", "2", "--json")
    assert res.returncode == 0, res.stderr
    gpus = json.loads(res.stdout)["checks"][0]
    assert gpus["details"]["rocminfo"] == str(script) and gpus["details"]["count"] == 2


def test_gpus_zero_skips_rocminfo(tmp_path, fb, healthy):
    fb.hang("rocminfo")
    res = check_cli(tmp_path, fb, healthy, "--gpus", "0")
    assert res.returncode == 0, res.stderr
    assert "ok    gpus: skipped (--gpus 0)" in res.stderr
    assert fb.calls("rocminfo") == []


# --------------------------------------------------------------------------- /dev/kfd

def test_missing_kfd(tmp_path, fb):
    fb.ok("rocminfo", ROCMINFO_2_GPUS)
    fake_docker(fb)
    root = make_root(tmp_path, kfd=False)
    res = check_cli(tmp_path, fb, root)
    line = fail_line(res, "kfd")
    assert "/dev/kfd does not exist: the amdgpu kernel driver is not loaded" in line and "modprobe amdgpu" in line
    assert_one_error(res, 15, "kfd")


@pytest.mark.skipif(not IS_ROOT or not shutil.which("setpriv"), reason="needs root and setpriv to become nobody")
def test_kfd_not_accessible_to_an_unprivileged_user():
    """Run the check as `nobody` (not in the device's group): the real permission check, no mock."""
    nobody = pwd.getpwnam("nobody")
    base = Path(tempfile.mkdtemp(prefix="ghbuild-kfd-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        (base / "bin").mkdir(mode=0o755)
        fb = FakeBin(base / "bin")
        fb.ok("rocminfo", ROCMINFO_2_GPUS)
        fake_docker(fb)
        fb.log.touch()
        os.chmod(fb.log, 0o666)
        root = make_root(base, kfd_mode=0o660)
        for p in [base, *base.rglob("*")]:
            if p.is_dir():
                os.chmod(p, 0o755)
        # `nobody` may not reach the checkout or its venv (a clone in a 0700 folder): run a copy of the
        # package, with the interpreter itself (runner-check needs nothing beyond the standard library).
        shutil.copytree(Path(__file__).resolve().parents[1] / "ghbuild", base / "src" / "ghbuild",
                        ignore=shutil.ignore_patterns("__pycache__"))
        for p in (base / "src").rglob("*"):
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        os.chmod(base / "src", 0o755)
        env = clean_env(fb.path, HOME="/nonexistent", PYTHONPATH=str(base / "src"), PYTHONDONTWRITEBYTECODE="1")
        res = run_cli(["runner-check", "--root", str(root), "--min-free-disk", "1KB", "--disk-path", str(base)],
                      env, base, prefix=["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                                         "--clear-groups"],
                      command=[os.path.realpath(sys.executable), "-m", "ghbuild"])
        line = fail_line(res, "kfd")
        assert f"/dev/kfd is not readable and writable by nobody (uid {nobody.pw_uid}" in line
        assert "mode 0o660, group render" in line
        assert "sudo usermod -aG render,video nobody" in line and "restart the runner service" in line
        assert_one_error(res, 15, "1 of 5 checks failed: kfd")
    finally:
        shutil.rmtree(base, ignore_errors=True)


# --------------------------------------------------------------------------- render gid

def test_render_gid_from_etc_group_without_devices(tmp_path, fb):
    fb.ok("rocminfo", ROCMINFO_2_GPUS)
    fake_docker(fb)
    root = make_root(tmp_path, group="render:x:993:runner", render_devices={})
    res = check_cli(tmp_path, fb, root, "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["checks"][2]["details"] == {"gid": 993, "source": "/etc/group"}


@pytest.mark.skipif(not IS_ROOT, reason="needs root to give the device another group")
def test_device_gid_wins_over_etc_group_with_a_warning(tmp_path, fb):
    fb.ok("rocminfo", ROCMINFO_2_GPUS)
    fake_docker(fb)
    root = make_root(tmp_path, group="render:x:993:", render_devices={"renderD128": 110, "card0": 44})
    res = check_cli(tmp_path, fb, root, "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["checks"][2]["details"] == {"gid": 110, "source": "/dev/dri/renderD128"}
    assert ("warn  render-gid: /etc/group has render=993 but /dev/dri/renderD128 belongs to gid 110; "
            "using the device's gid") in res.stderr


def test_no_render_group_fails(tmp_path, fb):
    fb.ok("rocminfo", ROCMINFO_2_GPUS)
    fake_docker(fb)
    root = make_root(tmp_path, group=None, render_devices={})
    res = check_cli(tmp_path, fb, root)
    assert "no render group: /etc/group has no `render` entry" in fail_line(res, "render-gid")
    assert_one_error(res, 15, "render-gid")


# --------------------------------------------------------------------------- disk

def test_disk_below_minimum(tmp_path, fb, healthy):
    res = check_cli(tmp_path, fb, healthy, "--min-free-disk", "1000TB", "--disk-path", str(tmp_path))
    line = fail_line(res, "disk")
    assert f"free on {tmp_path} (--disk-path), need 1000000.00 GB" in line
    assert line.startswith("FAIL  disk: only ") and "docker image prune" in line
    assert_one_error(res, 15, "disk")


def test_disk_minimum_accepts_sizes_and_refuses_junk(tmp_path, fb, healthy):
    res = check_cli(tmp_path, fb, healthy, "--min-free-disk", "0.5GiB", "--disk-path", str(tmp_path), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["checks"][3]["details"]["minimum"] == 2**29
    res = check_cli(tmp_path, fb, healthy, "--min-free-disk", "lots")
    assert_one_error(res, 2, "usage error", "'lots' is not a size")


def test_disk_falls_back_to_cwd_when_docker_info_fails(tmp_path, fb, healthy):
    fb.fail("docker", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
                      "Is the docker daemon running?")
    res = check_cli(tmp_path, fb, healthy, "--json")
    disk = json.loads(res.stdout)["checks"][3]
    assert disk["ok"] is True and disk["details"]["path"] == str(tmp_path)
    assert "measured the current directory instead" in disk["warnings"][0]
    # ... and the containers check says the engine is unreachable, with the fix.
    line = fail_line(res, "containers")
    assert "`docker ps` failed (exit 1): Cannot connect to the Docker daemon" in line and "docker group" in line


# --------------------------------------------------------------------------- leftover containers

LEFTOVER = "a" * 64 + "\tjob-1234-smoke\trocm@sha256:" + "b" * 64 + "\t3 hours ago\tsmoke-test"
OTHER = "c" * 64 + "\tlocal-registry\tregistry:2\t2 weeks ago\t"


def test_leftover_containers_fail_and_others_are_listed(tmp_path, fb, healthy):
    fake_docker(fb, ps_lines=[LEFTOVER, OTHER])
    res = check_cli(tmp_path, fb, healthy)
    line = fail_line(res, "containers")
    assert "1 leftover container from earlier jobs still running: job-1234-smoke (up 3 hours ago)" in line
    assert "--clean-containers" in line
    assert "warn  containers: 1 other running container not started through ghbuild, left alone: local-registry" \
        in res.stderr
    assert_one_error(res, 15, "containers")
    assert not [c for c in fb.calls("docker") if c[:1] == ["rm"]], "nothing is removed without --clean-containers"


def test_clean_containers_removes_only_ours(tmp_path, fb, healthy):
    fake_docker(fb, ps_lines=[LEFTOVER, OTHER])
    res = check_cli(tmp_path, fb, healthy, "--clean-containers")
    assert res.returncode == 0, res.stderr
    assert "ok    containers: removed 1 leftover container: job-1234-smoke" in res.stderr
    assert [c for c in fb.calls("docker") if c[:1] == ["rm"]] == [["rm", "-f", "a" * 64]]


def test_clean_containers_failure_is_reported(tmp_path, fb, healthy):
    fake_docker(fb, ps_lines=[LEFTOVER], rm_code=1)
    res = check_cli(tmp_path, fb, healthy, "--clean-containers")
    assert "could not remove 1 leftover container (job-1234-smoke" in fail_line(res, "containers")
    assert_one_error(res, 15, "containers")


def test_hanging_docker_is_bounded(tmp_path, fb, healthy):
    fb.hang("docker")
    res = check_cli(tmp_path, fb, healthy, "--docker-timeout", "1")
    # docker info (disk) and docker ps (containers): two 1 s timeouts.
    assert res.seconds < 2 + SLACK, f"took {res.seconds:.1f} s with 1 s docker timeouts"
    assert "`docker ps` did not answer within 1 s and was killed" in fail_line(res, "containers")
    assert not survivors(fb.pids("docker"))


def test_missing_docker(tmp_path, fb, healthy):
    (fb.path / "docker").unlink()
    env = clean_env(fb.path)
    env["PATH"] = str(fb.path)          # no real docker either
    res = run_cli(["runner-check", "--root", str(healthy), "--min-free-disk", "1KB"], env, tmp_path)
    assert "docker CLI not found" in fail_line(res, "containers")


# --------------------------------------------------------------------------- GitHub Actions

def test_in_actions_failures_become_annotations_summary_and_outputs(tmp_path, fb, healthy):
    summary, output = tmp_path / "summary.md", tmp_path / "output.txt"
    summary.write_text("")
    output.write_text("")
    res = check_cli(tmp_path, fb, healthy, "--gpus", "3",
                    env_extra={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary),
                               "GITHUB_OUTPUT": str(output)})
    assert res.returncode == 15
    assert "::error title=ROCm runner check::gpus: rocminfo sees 2 GPUs (gfx942 x2), expected at least 3" in res.stderr
    text = summary.read_text()
    assert "### ROCm runner check: FAILED (gpus)" in text and "| gpus | **FAIL** |" in text
    outputs = output.read_text()
    assert f"--group-add {RENDER_GID}" in outputs and "render-gid" in outputs


# --------------------------------------------------------------------------- container flags

def test_container_flags_exact(tmp_path, fb):
    env = clean_env(fb.path)
    res = run_cli(["container-flags", "--gid", "993"], env, tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == FLAGS_993
    res = run_cli(["container-flags", "--gid", "993", "--json", "--shm-size", "8g", "--no-label"], env, tmp_path)
    assert json.loads(res.stdout) == ["--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "993",
                                      "--security-opt", "seccomp=unconfined", "--shm-size", "8g"]


def test_container_flags_detects_the_render_gid(tmp_path, fb):
    root = make_root(tmp_path)
    res = run_cli(["container-flags", "--root", str(root), "--json"], clean_env(fb.path), tmp_path)
    assert res.returncode == 0, res.stderr
    flags = json.loads(res.stdout)
    assert flags[flags.index("--group-add") + 1] == str(RENDER_GID)


def test_container_flags_errors_are_one_line(tmp_path, fb):
    env = clean_env(fb.path)
    root = make_root(tmp_path, group=None, render_devices={})
    assert_one_error(run_cli(["container-flags", "--root", str(root)], env, tmp_path), 15, "no render group",
                     "--gid N")
    assert_one_error(run_cli(["container-flags", "--gid", "993", "--shm-size", "16 gigs"], env, tmp_path), 2,
                     "'16 gigs' is not a docker size")
    assert_one_error(run_cli(["container-flags", "--gid", "render"], env, tmp_path), 2,
                     "'render' is not a whole number")


def test_container_flags_function():
    assert health.container_flags(993) == FLAGS_993.split()
    assert health.container_flags(0, shm_size="512m", label=None)[-2:] == ["--shm-size", "512m"]
    for bad in ("993", True, -1, 9.5):
        with pytest.raises(ValueError):
            health.container_flags(bad)
    with pytest.raises(ValueError):
        health.container_flags(993, shm_size="16g; rm -rf /")
    with pytest.raises(ValueError):
        health.container_flags(993, label="x y")


def test_parse_rocminfo():
    assert health.parse_rocminfo(ROCMINFO_2_GPUS) == ["gfx942", "gfx942"]
    assert health.parse_rocminfo(ROCMINFO_CPU_ONLY) == []
    assert health.parse_rocminfo("") == []
    # Without Agent headers, every `Name: gfx*` line is one agent (ISA names are not).
    assert health.parse_rocminfo("  Name: gfx90a\n  Name: amdgcn-amd-amdhsa--gfx90a:xnack-\n  Name: gfx1100\n") == \
        ["gfx90a", "gfx1100"]


def test_gpus_0_skips_every_gpu_check_on_a_runner_without_gpus(tmp_path):
    """A build job on a ROCm runner needs disk and a clean engine, not /dev/kfd or the render group."""
    from ghbuild.runner import health

    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "group").write_text("video:x:44:\n")          # no render group, no /dev/kfd at all
    host = health.Host(root=root)
    report = health.check(gpus=0, min_free_disk="1B", disk_path=tmp_path, host=host, docker_timeout=5)
    by_name = {c.name: c for c in report.checks}
    assert [by_name[n].ok for n in ("gpus", "kfd", "render-gid")] == [True, True, True]
    assert all("skipped" in by_name[n].message for n in ("gpus", "kfd", "render-gid"))
    with_gpu = health.check(gpus=1, min_free_disk="1B", disk_path=tmp_path, host=host, docker_timeout=5)
    assert not {c.name: c for c in with_gpu.checks}["kfd"].ok
