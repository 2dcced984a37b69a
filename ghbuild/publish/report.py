"""What a publish did, as text, the job summary's Markdown, step outputs and release notes."""

from __future__ import annotations

import json

from ghbuild.markdown import code, md
from ghbuild.publish.results import PublishResult, PublishRun


def render(result: PublishResult, kind: str = "nightly") -> str:
    lines = [f"ghbuild publish {kind}: {result.image}" + (" (dry run: nothing pushed)" if result.dry_run else "")]
    lines += [f"  {a}" for a in result.actions]
    for ref, digest in result.tags.items():
        state = "unchanged" if ref in result.unchanged else ("would move" if result.dry_run else "moved")
        lines.append(f"  {ref} = {digest} ({state})")
    if result.stats:
        s = result.stats
        lines.append(f"  bytes copied {s.get('copied_bytes', 0):,} in {s.get('copied_blobs', 0)} blobs; "
                     f"present {s.get('skipped_bytes', 0):,} in {s.get('skipped_blobs', 0)}; "
                     f"mounted {s.get('mounted_bytes', 0):,} in {s.get('mounted_blobs', 0)}{_interruptions(s)}")
    return "\n".join(lines)


def _interruptions(stats: dict) -> str:
    """What cut uploads cost, when one was: how many resumed, how many sent again whole, the bytes sent in all."""
    resumed, resent = stats.get("resumed_blobs", 0), stats.get("resent_blobs", 0)
    if not resumed and not resent:
        return ""
    return (f"; uploads cut: {resumed} resumed, {resent} sent again whole, {stats.get('sent_bytes', 0):,} bytes "
            f"sent in all")


def summary(outcome: PublishRun, dry_run: bool = False) -> str:
    """The job summary of a publish: per image, every tag with its digest and what happened to it."""
    title = f"ghbuild publish {outcome.kind}" + (f" v{outcome.version}" if outcome.version else "")
    lines = [f"### {md(title)}" + (" (dry run: nothing pushed)" if dry_run else ""), "",
             f"Commit {code(outcome.sha)}.", ""]
    if outcome.unchecked:       # a GitHub alert: the opt-out or the local warning is not a footnote
        lines += ["> [!WARNING]", f"> {md(outcome.unchecked)}", ""]
    for result in outcome.results:
        moved = set(result.moved)
        left = {a.split()[1] for a in result.actions if a.startswith("leave ")}
        lines += [f"#### {md(result.image)}", "", f"Index {code(result.index_digest or '')}.", "",
                  "| tag | digest | |", "|---|---|---|"]
        for ref, digest in result.tags.items():
            state = ("unchanged" if ref not in moved and ref not in left else
                     "left: a newer commit holds it" if ref in left else "would move" if dry_run else "moved")
            lines.append(f"| {code(ref)} | {code(digest)} | {state} |")
        s = result.stats or {}
        if not dry_run:
            lines += ["", f"Copied {s.get('copied_bytes', 0):,} bytes in {s.get('copied_blobs', 0)} blobs; "
                          f"{s.get('skipped_bytes', 0) + s.get('mounted_bytes', 0):,} bytes were already there "
                          f"or mounted ({s.get('skipped_blobs', 0) + s.get('mounted_blobs', 0)} blobs)"
                          f"{_interruptions(s)}."]
        lines.append("")
    if outcome.github_release:
        lines.append(f"GitHub release: {md(outcome.github_release)}")
    return "\n".join(lines) + "\n"


def failure_summary(kind: str, error: Exception) -> str:
    """The job summary of a failed publish: the error, and after a failed tag phase every tag restored
    and every tag that could not be, with the digests."""
    lines = [f"### ghbuild publish {md(kind)}: failed", "", md(error), ""]
    phase = getattr(error, "phase", None)
    if phase is not None:
        lines += [f"- restored {md(item)}" for item in phase.restored]
        lines += [f"- **not restored**: {md(item)}" for item in phase.unrestored]
        lines.append("")
    return "\n".join(lines) + "\n"


def outputs(outcome: PublishRun) -> dict[str, str]:
    """The step outputs: `digests` (image -> index digest), `tags` (one ref per line), `metadata` (JSON),
    `subject-checksums` (subject_checksums)."""
    return {"digests": json.dumps({r.image: r.index_digest for r in outcome.results}, sort_keys=True),
            "tags": "\n".join(ref for r in outcome.results for ref in r.tags),
            "metadata": json.dumps(outcome.to_dict(), sort_keys=True),
            "subject-checksums": subject_checksums(outcome)}


def subject_checksums(outcome: PublishRun) -> str:
    """Every digest published (per image its index, then each architecture's image), one `<hex>  <repository>`
    line each, sha256sum's format: what actions/attest-build-provenance's `subject-checksums` input reads."""
    lines: list[str] = []
    for result in outcome.results:
        repo = _repository(result)
        for digest in (result.index_digest, *(d for _, d in sorted(result.arch_digests.items()))):
            line = f"{digest.split(':', 1)[1]}  {repo}" if repo and digest else None
            if line and line not in lines:
                lines.append(line)
    return "\n".join(lines)


def release_notes(outcome: PublishRun, repository: str, signed: str, branch: str | None = None) -> str:
    """Markdown for the GitHub release, from what the release published: per image its tags and digests (the
    multi-arch index, then each architecture's image), and the `ghbuild verify` command that checks it.
    `repository`: the canonical OWNER/NAME the signatures name; `signed`: how publishing signed (key, keyless,
    none: ghbuild.sign.policy); `branch`: the stable branch a keyless signature must come from (named in the
    command unless it is `ghbuild verify`'s own default, main)."""
    lines = [f"Images for v{outcome.version} of {repository}, built from commit {outcome.sha}.", ""]
    verify = []
    for result in outcome.results:
        lines += [f"### {result.image}", "", "| image | digest |", "|---|---|"]
        lines += [f"| `{ref}` | `{digest}` |" for ref, digest in result.tags.items()]
        repo = _repository(result)
        if repo and result.index_digest:
            verify.append(f"{repo}@{result.index_digest}")
        lines += [f"| `{repo}@{digest}` ({arch} alone) | `{digest}` |"
                  for arch, digest in sorted(result.arch_digests.items()) if repo]
        lines.append("")
    lines += ["### Verify", ""]
    if signed == "none" or not verify:
        return "\n".join([*lines, "These images are not signed: there is nothing to verify them against.", ""])
    how = ("signed with the project's cosign key; `cosign.pub` is its public key" if signed == "key" else
           f"signed keyless by a GitHub Actions workflow of {repository} (Sigstore: Fulcio, Rekor)")
    key = " --key cosign.pub" if signed == "key" else ""
    key += f" --branch {branch}" if signed != "key" and branch and branch != "main" else ""
    lines += [f"Every digest above is {how}, and its provenance names commit {outcome.sha}. Check it with "
              "ghbuild (with cosign 2 on PATH):", "", "```sh"]
    lines += [f"ghbuild verify {ref} --repository {repository}{key} --sha {outcome.sha}" for ref in verify]
    return "\n".join([*lines, "```", ""])


def _repository(result: PublishResult) -> str | None:
    """The publish repository (host/path) of a result, from its first tag reference."""
    ref = next(iter(result.tags), "")
    return ref.rsplit(":", 1)[0] if ":" in ref.rsplit("/", 1)[-1] else None
