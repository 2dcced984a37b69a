"""Retention of nightly tags, the pure part (ghbuild.retention.plan and the Docker Hub tag parser): no
server, no I/O. The backends against real registries are in tests/services/registry/test_retention_backends.py."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
from fakes.dockerhub import MT_OCI_INDEX

from ghbuild.errors import PruneError
from ghbuild.retention.dockerhub import hub_tag_info
from ghbuild.retention.plan import TagInfo, parse_time, plan_prune

BASE = datetime(2025, 1, 1, tzinfo=UTC)


def sha(n: int | str) -> str:
    return hashlib.sha1(str(n).encode()).hexdigest()


# --------------------------------------------------------------------------- the plan (pure)


def test_plan_groups_per_commit_tags_and_never_touches_moving_tags():
    t = lambda h: BASE + timedelta(hours=h)  # noqa: E731
    tags = [
        TagInfo("nightly", "sha256:i3", t(9), ("sha256:a3", "sha256:b3")),
        TagInfo("nightly-x86_64", "sha256:a3", t(9)),
        TagInfo("nightly-arm64", "sha256:b3", t(9)),
        TagInfo(f"nightly-{sha(3)}", "sha256:i3", t(3), ("sha256:a3", "sha256:b3")),
        TagInfo(f"nightly-{sha(2)}", "sha256:i2", t(2), ("sha256:a2", "sha256:b2")),
        TagInfo(f"nightly-{sha(2)}-x86_64", "sha256:a2", t(2)),
        TagInfo(f"nightly-{sha(1)}", "sha256:i1", t(1), ("sha256:a1", "sha256:b1")),
        TagInfo(f"nightly-{sha(1)}-arm64", "sha256:b1", t(1)),
        TagInfo(f"nightly-{sha(0)}-x86_64", "sha256:a3", t(0)),   # an old per-arch tag on a kept child
        TagInfo(f"nightly-{sha(4)}", None, None),                  # no push time: kept
        TagInfo(f"nightly-{sha(5)}-amd64", "sha256:x", t(0)),      # not a configured suffix: not a candidate
        TagInfo("v1.0.0", "sha256:b1", t(0)),                      # a release tag protects its digest
        TagInfo("latest", "sha256:r", t(0)),
    ]
    plan = plan_prune(tags, keep=2)
    kinds = {d.tag: d.kind for d in plan.keep + plan.delete}
    assert plan.kept_commits == [sha(3), sha(2)]                    # per-arch tags count with their commit
    assert kinds[f"nightly-{sha(2)}-x86_64"] == "newest"
    assert {d.tag for d in plan.delete} == {f"nightly-{sha(1)}"}
    assert kinds[f"nightly-{sha(1)}-arm64"] == "referenced"         # v1.0.0 is on the same digest
    assert kinds[f"nightly-{sha(0)}-x86_64"] == "referenced"        # a child of the kept nightly-<sha3>
    assert kinds[f"nightly-{sha(4)}"] == "no-time"
    assert kinds[f"nightly-{sha(5)}-amd64"] == kinds["latest"] == "other"
    assert {kinds[m] for m in ("nightly", "nightly-x86_64", "nightly-arm64")} == {"moving"}
    assert "child of" in plan.protected["sha256:a3"] or plan.protected["sha256:a3"].startswith("tag ")

    # Moving tags are never candidates, whatever keep says; keep must be >= 1.
    only_moving = plan_prune(tags[:3], keep=1)
    assert only_moving.delete == [] and len(only_moving.keep) == 3
    for bad in (0, -1, True, "3"):
        with pytest.raises(PruneError):
            plan_prune(tags, keep=bad)
    # Another nightly tag name and suffixes from the config.
    custom = plan_prune([TagInfo(f"edge-{sha(i)}-amd", f"sha256:{i}", BASE + timedelta(hours=i)) for i in range(3)],
                        keep=1, nightly_tag="edge", arch_suffixes=("amd", "arm"))
    assert [d.tag for d in custom.delete] == [f"edge-{sha(0)}-amd", f"edge-{sha(1)}-amd"]


def test_parse_time_and_hub_tag_objects():
    assert parse_time("2024-04-29T18:36:09.683545Z") == datetime(2024, 4, 29, 18, 36, 9, 683545, UTC)
    assert parse_time("2024-05-01T12:00:00.123456789Z").microsecond == 123456   # BuildKit nanoseconds
    assert parse_time("2025-01-01T00:00:00+02:00") == datetime(2024, 12, 31, 22, tzinfo=UTC)
    assert parse_time(None) is None and parse_time("yesterday") is None
    info = hub_tag_info({"name": "nightly", "digest": "sha256:i", "media_type": MT_OCI_INDEX,
                               "tag_last_pushed": None, "last_updated": "2025-01-01T00:00:00.000000Z",
                               "images": [{"digest": "sha256:a"}, {"digest": "sha256:b"}]})
    assert info == TagInfo("nightly", "sha256:i", BASE, ("sha256:a", "sha256:b"))
    old = hub_tag_info({"name": "x", "images": [{"digest": "sha256:a"}],
                              "tag_last_pushed": "2025-01-02T00:00:00Z", "last_updated": "2025-01-03T00:00:00Z"})
    assert old == TagInfo("x", "sha256:a", BASE + timedelta(days=1), ())
