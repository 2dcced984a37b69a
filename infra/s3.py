"""S3 for sccache: ``moto_server`` on loopback and the ``ghbuild-sccache`` bucket.

moto keeps everything in memory: when it restarts the bucket is gone, so ``up`` re-creates it.
moto's server mode does not check request signatures, so plain unsigned urllib requests work.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import procs
from .common import (
    LOOPBACK,
    SCCACHE_BUCKET,
    InfraError,
    http,
    info,
    listener_description,
    logs_dir,
    port_open,
    repo_root,
    wait_until,
)

START_TIMEOUT = 60.0
ROLE = "s3"


def s3_answers(port: int) -> bool:
    resp = http("GET", f"http://{LOOPBACK}:{port}/", timeout=3)
    return resp is not None and resp.status == 200 and b"ListAllMyBucketsResult" in resp.body


def bucket_exists(port: int, bucket: str = SCCACHE_BUCKET) -> bool:
    resp = http("HEAD", f"http://{LOOPBACK}:{port}/{bucket}", timeout=5)
    return resp is not None and resp.status == 200


def ensure_s3(state: dict, port: int, moto_server: Path) -> None:
    rec = procs.find_record(state, ROLE)
    if rec and not procs.is_ours_alive(rec):
        procs.drop_record(state, ROLE)
        rec = None
    if rec and rec.get("port") != port:
        info(f"s3: port changed ({rec.get('port')} -> {port}); restarting pid {rec['pid']}")
        procs.stop(rec, timeout=10)
        procs.drop_record(state, ROLE)
        procs.save_state(state)
        rec = None
    if rec:
        if not wait_until(lambda: s3_answers(port), timeout=START_TIMEOUT, interval=0.25):
            raise InfraError("s3", f"our moto_server (pid {rec['pid']}) does not answer on {LOOPBACK}:{port}")
        info(f"s3: moto_server running on {LOOPBACK}:{port} (started by us, pid {rec['pid']})")
    else:
        if port_open(port):
            raise InfraError(
                "s3",
                f"port {LOOPBACK}:{port} is already in use by {listener_description(port)}, not started by us; "
                "stop it or set GHBUILD_INFRA_S3_PORT",
            )
        log = logs_dir() / "moto.log"
        env = dict(os.environ)
        # Keep moto from picking up real-looking settings from the caller's environment.
        for k in list(env):
            if k.startswith(("MOTO_", "AWS_")):
                env.pop(k)
        cmd = [str(moto_server), "-H", LOOPBACK, "-p", str(port)]
        popen = procs.start_and_wait(state, ROLE, cmd, log=log, env=env, port=port, ready=lambda: s3_answers(port),
                             what=f"moto_server on {LOOPBACK}:{port}", timeout=START_TIMEOUT, interval=0.25,
                             cwd=repo_root())
        info(f"s3: started moto_server pid {popen.pid} on {LOOPBACK}:{port}")
    if bucket_exists(port):
        info(f"s3: bucket {SCCACHE_BUCKET} present")
        return
    resp = http("PUT", f"http://{LOOPBACK}:{port}/{SCCACHE_BUCKET}", data=b"", timeout=10)
    if resp is None or resp.status not in (200, 201):
        status = resp.status if resp else "no answer"
        raise InfraError("s3", f"creating bucket {SCCACHE_BUCKET}: PUT answered {status}")
    if not bucket_exists(port):
        raise InfraError("s3", f"bucket {SCCACHE_BUCKET} missing right after it was created")
    info(f"s3: created bucket {SCCACHE_BUCKET} (in memory: re-created by every `up` after a moto restart)")
