"""The one delete loop of ghbuild.retention (`prune`), with tiny in-memory backends that implement
ghbuild.retention.backend.Backend (by tag and by digest): no server, no waiting (`sleep` is injected and
records)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ghbuild.errors import PruneAbort, PruneError
from ghbuild.retention import PruneResult, markdown, prune, render
from ghbuild.retention.backend import Backend, DeletesDigests, DeletesTags, Deletion
from ghbuild.retention.plan import Decision, DigestDeletion, TagInfo

BASE = datetime(2025, 1, 1, tzinfo=UTC)


def sha(n: int | str) -> str:
    return hashlib.sha1(str(n).encode()).hexdigest()


class Waits(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


class _Memory:
    """Tags in a dict; `fail` maps a digest (by digest) or a tag name to the exception its delete raises."""

    name = "memory"
    unit = "item(s)"
    pace = 0.25

    def __init__(self, tags: list[TagInfo], fail: dict[str, Exception] | None = None):
        self.tags, self.fail = {t.name: t for t in tags}, dict(fail or {})
        self.manifests = {t.digest for t in tags} | {c for t in tags for c in t.children}
        self.calls: list[str] = []

    def list_tags(self) -> list[TagInfo]:
        return list(self.tags.values())

    def summary(self) -> str:
        return f"{len(self.tags)} tags"

    def stats(self) -> dict[str, int]:
        return {"listed": len(self.tags)}

    def entry(self, item: Deletion) -> dict:
        return {"tags": list(item.tags), "digest": item.digest, "reason": item.reason}

    def label(self, item: Deletion) -> str:
        return ", ".join(item.tags) or str(item.digest)

    def _call(self, key: str) -> None:
        self.calls.append(key)
        if key in self.fail:
            raise self.fail[key]


class MemoryTagBackend(_Memory, DeletesTags):
    """A Backend[Decision]: deletes one tag at a time."""

    def delete(self, item: Decision) -> bool:
        self._call(item.tag)
        return self.tags.pop(item.tag, None) is not None


class MemoryDigestBackend(_Memory, DeletesDigests):
    """A Backend[DigestDeletion]: deletes a manifest and every tag on it."""

    def delete(self, item: DigestDeletion) -> bool:
        self._call(item.digest)
        gone = item.digest in self.manifests
        self.manifests.discard(item.digest)
        for name in [n for n, t in self.tags.items() if t.digest == item.digest]:
            del self.tags[name]
        return gone


def memory_backend(tags: list[TagInfo], *, by_digest: bool,
                   fail: dict[str, Exception] | None = None) -> MemoryTagBackend | MemoryDigestBackend:
    return MemoryDigestBackend(tags, fail) if by_digest else MemoryTagBackend(tags, fail)


def commits(n: int) -> list[TagInfo]:
    """n commits, oldest first: an index `nightly-<sha>` with two untagged children each."""
    return [TagInfo(f"nightly-{sha(i)}", f"sha256:i{i}", BASE + timedelta(hours=i), (f"sha256:a{i}", f"sha256:b{i}"))
            for i in range(n)]


def run(backend: Backend[Any], *, apply: bool, keep: int = 1, waits: Waits | None = None) -> PruneResult:
    result = PruneResult("app", "mem/acme/app", backend.name, None, not apply, keep)
    return prune(backend, result, apply=apply, log=lambda m: None, sleep=waits if waits is not None else Waits(),
                 pace=backend.pace)


def test_backend_protocol_is_what_the_loop_uses():
    by_tag: Backend[Decision] = MemoryTagBackend(commits(1))              # type-check as the Protocol
    by_digest: Backend[DigestDeletion] = MemoryDigestBackend(commits(1))
    for backend in (by_tag, by_digest):
        assert backend.list_tags()[0].name == f"nightly-{sha(0)}"


@pytest.mark.parametrize("by_digest", [False, True])
def test_dry_run_deletes_nothing_and_lists_would_delete(by_digest):
    backend = memory_backend(commits(3), by_digest=by_digest)
    waits = Waits()
    result = run(backend, apply=False, waits=waits)
    assert backend.calls == [] and waits == [] and len(backend.tags) == 3
    assert result.dry_run and result.deleted == [] and result.errors == [] and result.ok
    doomed = [e["digest"] for e in result.would_delete]
    if by_digest:   # oldest first, each index before its children
        assert doomed == ["sha256:i0", "sha256:a0", "sha256:b0", "sha256:i1", "sha256:a1", "sha256:b1"]
    else:
        assert doomed == ["sha256:i0", "sha256:i1"]
    data = result.to_dict()
    assert list(data) == ["image", "repository", "backend", "api", "dry_run", "keep", "kept", "deleted",
                          "would_delete", "skipped_referenced", "errors", "stats", "ok", "dangling"]
    assert data["stats"] == {"tags": 3, "candidates": 3, "commits": 3, "commits_kept": 1, "other_tags": 0,
                             "listed": 3, "deletes": 0}
    assert "(dry run: nothing deleted)" in render(result)


def test_job_summary_lists_every_tag_kept_or_deleted_and_marks_a_dry_run():
    dry, applied = run(memory_backend(commits(3), by_digest=False), apply=False), \
        run(memory_backend(commits(3), by_digest=False), apply=True)
    text = markdown([dry])
    assert "**dry run**: nothing deleted; keep the newest 1 commits. 2 would be deleted, 0 failed." in text
    assert f"| keep | `nightly-{sha(2)}` | `sha256:i2` |" in text
    assert f"| would delete | `nightly-{sha(0)}` | `sha256:i0` |" in text
    text = markdown([applied])
    assert "dry run" not in text and "applied; keep the newest 1 commits. 2 deleted, 0 failed." in text
    assert f"| deleted | `nightly-{sha(1)}` | `sha256:i1` |" in text


def test_job_summary_escapes_tag_names_and_reasons():
    result = run(memory_backend(commits(1), by_digest=False), apply=False)
    result.kept = [{"tags": ["x|<b>`y"], "digest": "sha256:i0", "reason": "| [a](b) <i>"}]
    text = markdown([result])
    assert "<b>" not in text and "<i>" not in text and "](b)" not in text.replace("\\](b)", "")
    assert "<code>x&#124;&lt;b&gt;&#96;y</code>" in text and "\\| \\[a\\](b) &lt;i&gt;" in text


def test_apply_deletes_paced_and_reports():
    backend = memory_backend(commits(3), by_digest=True)
    waits = Waits()
    result = run(backend, apply=True, waits=waits)
    assert result.ok and result.errors == [] and result.would_delete == []
    assert backend.calls == ["sha256:i0", "sha256:a0", "sha256:b0", "sha256:i1", "sha256:a1", "sha256:b1"]
    assert waits == [0.25] * 5                       # between deletes, none before the first
    assert result.stats["deletes"] == 6 and list(backend.tags) == [f"nightly-{sha(2)}"]


def test_prune_abort_stops_the_loop_and_is_recorded():
    backend = memory_backend(commits(4), by_digest=False,
                            fail={f"nightly-{sha(1)}": PruneAbort("token refused (HTTP 401)")})
    result = run(backend, apply=True)
    assert backend.calls == [f"nightly-{sha(0)}", f"nightly-{sha(1)}"]    # nightly-<sha2> never tried
    assert [e["tags"] for e in result.deleted] == [[f"nightly-{sha(0)}"]]
    assert result.errors == [{"tags": [f"nightly-{sha(1)}"], "digest": "sha256:i1",
                              "reason": "commit #3: older than the newest 1", "error": "token refused (HTTP 401)"}]
    assert not result.ok and result.stats["deletes"] == 2
    assert f"nightly-{sha(2)}" in backend.tags


def test_prune_error_on_one_item_goes_on_with_the_next():
    backend = memory_backend(commits(4), by_digest=False, fail={f"nightly-{sha(0)}": PruneError("HTTP 500")})
    result = run(backend, apply=True)
    assert backend.calls == [f"nightly-{sha(i)}" for i in range(3)]
    assert [e["tags"][0] for e in result.deleted] == [f"nightly-{sha(1)}", f"nightly-{sha(2)}"]
    assert [(e["tags"][0], e["error"]) for e in result.errors] == [(f"nightly-{sha(0)}", "HTTP 500")]
    assert result.ok is False and result.to_dict()["ok"] is False
    assert "FAILED" in render(result)


def test_the_children_of_an_index_that_failed_are_kept():
    backend = memory_backend(commits(3), by_digest=True, fail={"sha256:i0": PruneError("HTTP 500")})
    waits = Waits()
    result = run(backend, apply=True, waits=waits)
    # i0 failed: a0 and b0 are never deleted (recorded as errors); commit 1 goes on as usual.
    assert backend.calls == ["sha256:i0", "sha256:i1", "sha256:a1", "sha256:b1"]
    assert {"sha256:a0", "sha256:b0", "sha256:i0"} <= backend.manifests
    assert [(e["digest"], e["error"]) for e in result.errors] == [
        ("sha256:i0", "HTTP 500"),
        ("sha256:a0", "not deleted: its index could not be deleted"),
        ("sha256:b0", "not deleted: its index could not be deleted")]
    assert [e["digest"] for e in result.deleted] == ["sha256:i1", "sha256:a1", "sha256:b1"]
    assert not result.ok and result.stats["deletes"] == 4 and waits == [0.25] * 3


def test_already_gone_is_deleted_and_flagged():
    backend = memory_backend(commits(2), by_digest=True)
    backend.manifests.discard("sha256:a0")            # deleted behind our back since the listing
    result = run(backend, apply=True)
    assert result.ok and [e.get("already_gone", False) for e in result.deleted] == [False, True, False]
