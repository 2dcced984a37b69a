"""The planner: GitHub context + options in, build plan out. Pure: no I/O, no clock, no network.

It decides trust, the cache scopes each job reads and writes, the per-commit
staging tags and the runner each job runs on.

Policy for `pull_request_target` with a fork head: the plan is READ-ONLY, not refused. The job
may read caches and build, but writes no cache (not even the GitHub Actions cache, which in
that event is stored under the base branch), pushes nothing and is handed no secrets
(`secrets: false`); a warning says so. Refusing would fail the label-and-comment workflows
people legitimately run on that event; planning read-only gives the fork's code nothing to steal.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ghbuild import naming
from ghbuild.config.options import PLATFORM_ARCH, ImageOptions, Options
from ghbuild.errors import UsageError
from ghbuild.github.event import PR_EVENTS, GitHubContext
from ghbuild.plan.cachemounts import CacheMountRef, plan_mounts

FALLBACK_STABLE_BRANCH = "main"

# GitHub's hosted runner labels (standard and macOS larger runners), compared case-insensitively as GitHub
# does. A list, not a pattern: a name GitHub does not serve (yet, or any more) may be a self-hosted runner's own
# label, and a job whose runs-on is not exactly one of these may land on a self-hosted runner. Larger Linux and
# Windows runners have names an organization picks: trust.hosted-runner-labels lists them.
HOSTED_LABELS = frozenset({
    "ubuntu-latest", "ubuntu-26.04", "ubuntu-24.04", "ubuntu-22.04",
    "ubuntu-26.04-arm", "ubuntu-24.04-arm", "ubuntu-22.04-arm", "ubuntu-slim",
    "windows-latest", "windows-2025", "windows-2022", "windows-11-arm",
    "macos-latest", "macos-26", "macos-15", "macos-14", "macos-26-intel", "macos-15-intel",
    "macos-latest-large", "macos-15-large", "macos-14-large",
    "macos-latest-xlarge", "macos-26-xlarge", "macos-15-xlarge", "macos-14-xlarge",
})


def github_hosted(labels: tuple[str, ...] | list[str], extra: tuple[str, ...] | list[str] = ()) -> bool:
    """True only for one label that names a GitHub-hosted runner (or one of `extra`, the repository's larger
    runners); anything else counts as self-hosted."""
    known = HOSTED_LABELS | {label.strip().lower() for label in extra}
    return len(labels) == 1 and labels[0].strip().lower() in known


class Trust(NamedTuple):
    """Who may write what, for this run."""

    trusted: bool
    canonical_repository: str
    stable_branch: str
    scope: str                      # this run's own scope
    canonical_scope: str
    read_scopes: tuple[str, ...]    # ordered, de-duplicated, own scope first
    write_scope: str | None         # None: writes no cache at all
    registry_write: bool            # may push images and registry caches (has credentials)
    gha_write: bool                 # may write the GitHub Actions cache
    secrets: bool                   # may be handed secrets (sccache S3, registry logins)
    reason: str


class Job(NamedTuple):
    id: str
    image: str
    arch: str
    platform: str
    runs_on: tuple[str, ...]
    dockerfile: str
    context: str
    target: str | None
    build_args: dict[str, str]
    staging_repository: str | None
    tags: tuple[str, ...]
    push: bool
    cache_from: tuple[str, ...]
    cache_to: tuple[str, ...]
    gha_scope: str | None
    labels: dict[str, str]
    secrets: bool
    base: str | None = None                 # the content-addressed image this one builds FROM
    identity_prefix: str | None = None      # set: this image is content-addressed (built by ensure-base)
    canonical_staging_repository: str | None = None
    cache_mounts: tuple[CacheMountRef, ...] = ()   # RUN --mount=type=cache contents carried between runs


class BaseRefs(NamedTuple):
    """Where a content-addressed image is looked up (in order) and where this run may write it."""

    read: tuple[str, ...]
    write: str | None


class Plan(NamedTuple):
    context: GitHubContext
    trust: Trust
    jobs: tuple[Job, ...]
    warnings: tuple[str, ...] = ()

    def job(self, image: str, arch: str) -> Job:
        for job in self.jobs:
            if job.image == image and job.arch == arch:
                return job
        known = ", ".join(f"{j.image}/{j.arch}" for j in self.jobs) or "none"
        raise UsageError(f"--image {image} --arch {arch}: not in the plan (planned: {known})")

    def to_dict(self) -> dict[str, Any]:
        ctx = self.context
        t = self.trust
        return {
            "version": 1,
            "context": {
                "event": ctx.event,
                "repository": ctx.repository,
                "canonical_repository": t.canonical_repository,
                "ref": ctx.ref,
                "sha": ctx.sha,
                "pull_request": ctx.pull_request,
                "head_repository": ctx.head_repository,
                "is_fork": bool(ctx.is_fork),
                "base_ref": ctx.base_ref,
                "head_ref": ctx.head_ref,
                "default_branch": ctx.default_branch,
                "stable_branch": t.stable_branch,
                "trusted": t.trusted,
                "scope": t.scope,
                "canonical_scope": t.canonical_scope,
                "read_scopes": list(t.read_scopes),
                "write_scope": t.write_scope,
                "registry_write": t.registry_write,
                "gha_write": t.gha_write,
                "secrets": t.secrets,
                "reason": t.reason,
                "run_id": ctx.run_id,
                "run_attempt": ctx.run_attempt,
                "notes": list(ctx.notes),
            },
            "jobs": [_job_dict(j) for j in self.jobs],
            "warnings": list(self.warnings),
        }

    def matrix(self) -> dict[str, Any]:
        """`{"include": [...]}` for `strategy.matrix: ${{ fromJSON(...) }}`: the per-commit builds.

        Content-addressed images are not in it: `ensure-base` finds or builds them (see bases_matrix).
        """
        return {"include": [
            {"id": j.id, "image": j.image, "arch": j.arch, "platform": j.platform,
             "runs_on": list(j.runs_on), "push": j.push, "base": j.base or ""}
            for j in self.jobs if not j.identity_prefix
        ]}

    def bases_matrix(self, identities: dict[str, str]) -> dict[str, Any]:
        """One entry per content-addressed image x arch, with its identity (by job id) and `group`: the
        concurrency group of the job that may build it, per identity AND the scope it writes, so runs that
        would write the same ref wait for each other and an untrusted run never holds up a trusted one."""
        scope = self.trust.write_scope or self.trust.scope
        return {"include": [
            {"id": j.id, "image": j.image, "arch": j.arch, "platform": j.platform,
             "runs_on": list(j.runs_on), "identity": identities[j.id],
             "group": f"{scope}-{j.image}-{j.arch}-{identities[j.id]}"}
            for j in self.jobs if j.identity_prefix
        ]}


def _job_dict(job: Job) -> dict[str, Any]:
    data = job._asdict()
    data["build_args"], data["labels"] = dict(job.build_args), dict(job.labels)
    for key in ("runs_on", "tags", "cache_from", "cache_to"):
        data[key] = list(data[key])
    data["cache_mounts"] = [mount.to_dict() for mount in job.cache_mounts]
    return data


# --------------------------------------------------------------------------- trust

def _branch_scope(repo: str, branch: str, canonical: str, stable: str) -> str:
    if repo == canonical and branch == stable:
        return naming.canonical_scope(stable)
    return naming.preview_scope(repo, branch)


class _Decision(NamedTuple):
    """One event's answer: trusted or not, the scope it writes, what it may write, and why."""

    trusted: bool
    scope: str
    reason: str
    reads_after_own: tuple[str, ...] = ()
    registry_write: bool = True
    gha_write: bool = True
    secrets: bool = True


def decide_trust(ctx: GitHubContext, options: Options) -> tuple[Trust, list[str]]:
    """Who may write what. Trust comes from what GitHub reports about the run (event, repository, ref,
    the payload's default branch, GITHUB_REF_PROTECTED), never from the checkout alone: a config in a
    branch that names that branch stable does not make it trusted unless GitHub protects it."""
    warnings: list[str] = list(options.notices)
    repo = naming.normalize_slug(ctx.repository)
    canonical = options.trust.canonical_repository or repo
    stable = _stable_branch(ctx, options, warnings)
    canonical_scope = naming.canonical_scope(stable)
    if ctx.event in PR_EVENTS:
        decision = _pull_request_decision(ctx, repo, canonical, stable, warnings)
    elif ctx.event == "merge_group":
        assert ctx.base_ref
        decision = _Decision(False, naming.merge_queue_scope(repo, ctx.base_ref),
                             f"merge queue into {ctx.base_ref}: not yet merged, writes only the merge-queue scope",
                             (_branch_scope(repo, ctx.base_ref, canonical, stable),))
    elif repo == canonical and ctx.branch == stable and (stable == ctx.default_branch or bool(ctx.ref_protected)):
        decision = _Decision(True, canonical_scope, f"{ctx.event} on {stable} of {canonical}: trusted")
    else:
        ref_name = ctx.branch or ctx.ref.removeprefix("refs/tags/").removeprefix("refs/")
        decision = _Decision(False, naming.preview_scope(repo, ref_name),
                             _untrusted_push_reason(ctx, repo, canonical, stable))
    read_scopes = tuple(dict.fromkeys([decision.scope, *decision.reads_after_own, canonical_scope]))
    any_write = decision.registry_write or decision.gha_write
    trust = Trust(trusted=decision.trusted, canonical_repository=canonical, stable_branch=stable,
                  scope=decision.scope, canonical_scope=canonical_scope, read_scopes=read_scopes,
                  write_scope=decision.scope if any_write else None, registry_write=decision.registry_write,
                  gha_write=decision.gha_write, secrets=decision.secrets, reason=decision.reason)
    return trust, warnings


def _stable_branch(ctx: GitHubContext, options: Options, warnings: list[str]) -> str:
    """trust.stable-branch where GitHub backs it (the default branch, or a ref it reports protected)."""
    default = ctx.default_branch
    stable = options.trust.stable_branch or default
    if (stable and stable != default and ctx.branch == stable and ctx.event not in PR_EVENTS
            and not ctx.ref_protected):
        warnings.append(f"trust.stable-branch = {stable!r} ignored: it is not the default branch "
                        f"({default or 'unknown'}) and GitHub does not report {ctx.ref} protected "
                        "(GITHUB_REF_PROTECTED); protect it with a branch protection rule or ruleset")
        stable = default
    if not stable:
        stable = FALLBACK_STABLE_BRANCH
        warnings.append(f"stable branch unknown (no trust.stable-branch, no default branch in the payload): "
                        f"assuming {FALLBACK_STABLE_BRANCH!r}")
    return stable


def _pull_request_decision(ctx: GitHubContext, repo: str, canonical: str, stable: str,
                           warnings: list[str]) -> _Decision:
    source = naming.normalize_slug(ctx.head_repository) if ctx.head_repository else f"{repo}#deleted-head"
    scope = naming.pr_scope(int(ctx.pull_request or 0), source)
    assert ctx.base_ref
    reads = (_branch_scope(repo, ctx.base_ref, canonical, stable),)
    head = ctx.head_repository or "(deleted)"
    if ctx.is_fork and ctx.event == "pull_request_target":
        reason = f"pull_request_target from fork {head}: read-only (no cache writes, no push, no secrets)"
        warnings.append(reason + "; building a fork's code with the base repository's secrets is refused")
        return _Decision(False, scope, reason, reads, registry_write=False, gha_write=False, secrets=False)
    if ctx.is_fork:
        return _Decision(False, scope, f"pull request #{ctx.pull_request} from fork {head}: GitHub gives it no "
                                       "secrets; writes only its own GitHub Actions cache scope",
                         reads, registry_write=False, secrets=False)
    if ctx.event == "pull_request_target":
        # Its GitHub Actions cache entries are stored under the base branch's scope, which every later
        # run of that branch restores: a pull request must not write there, whoever opened it.
        return _Decision(False, scope, f"pull_request_target #{ctx.pull_request} from a branch of {repo}: writes "
                                       "only its own registry scope, no GitHub Actions cache (its entries would "
                                       "land in the base branch's)", reads, gha_write=False)
    return _Decision(False, scope, f"pull request #{ctx.pull_request} from a branch of {repo}: writes only its "
                                   "own scope", reads)


def _untrusted_push_reason(ctx: GitHubContext, repo: str, canonical: str, stable: str) -> str:
    if repo != canonical:
        return f"{ctx.event} in {repo}, not the canonical {canonical}: writes only its own scope"
    if ctx.branch is None:
        return f"{ctx.event} on {ctx.ref} (not a branch): writes only its own scope"
    if ctx.branch == stable:
        return (f"{ctx.event} on {stable}: the default branch is unknown and GitHub does not report "
                f"{ctx.ref} protected: writes only its own scope")
    return f"{ctx.event} on branch {ctx.branch}, not the stable {stable}: writes only its own scope"


# --------------------------------------------------------------------------- jobs

def _cache_key(scope: str, image: str, suffix: str) -> str:
    return naming.sanitize_tag(scope, suffix=f"-{image}-{suffix}")


def _job(ctx: GitHubContext, options: Options, trust: Trust, image: ImageOptions, platform: str) -> Job:
    arch = PLATFORM_ARCH[platform]
    suffix = options.publish.arch_suffixes[arch]
    owner = ctx.repository.split("/", 1)[0]
    mode = options.registries.cache_mode

    cache_repo = options.registries.cache and naming.expand_repository(options.registries.cache, image.name, owner)
    # The canonical scope is written only by the canonical repository, into its owner's namespace:
    # a run elsewhere (a fork's own push) reads its fallback there, not from a ref nobody writes.
    canonical_owner = trust.canonical_repository.split("/", 1)[0]
    canonical_cache_repo = options.registries.cache and naming.expand_repository(
        options.registries.cache, image.name, canonical_owner)
    staging_template = image.staging or options.registries.staging
    staging = staging_template and naming.expand_repository(staging_template, image.name, owner)
    if cache_repo and canonical_cache_repo:
        naming.validate_repository(cache_repo, "registries.cache")
        naming.validate_repository(canonical_cache_repo, "registries.cache")
    if staging:
        naming.validate_repository(staging, f"images.{image.name}.staging")
    if not trust.trusted:
        # Everything an untrusted run writes, and every scope but the canonical one, lives in repositories of
        # their own (naming.untrusted_repository): the trusted ones can then be read-only to untrusted jobs.
        cache_repo = cache_repo and naming.untrusted_repository(cache_repo)
        staging = staging and naming.untrusted_repository(staging)

    cache_from: list[str] = []
    for scope in trust.read_scopes:
        key = _cache_key(scope, image.name, suffix)
        if options.registries.gha_cache and trust.gha_write:
            # Reading type=gha needs the runtime token, and that token can write the cache: a run that
            # may not write it gets neither.
            cache_from.append(f"type=gha,scope={key}")
        if cache_repo:
            repo = canonical_cache_repo if scope == trust.canonical_scope else cache_repo
            cache_from.append(f"type=registry,ref={repo}:{key}")

    cache_to: list[str] = []
    gha_scope = None
    if trust.write_scope:
        key = _cache_key(trust.write_scope, image.name, suffix)
        if options.registries.gha_cache and trust.gha_write:
            gha_scope = key
            cache_to.append(f"type=gha,scope={key},mode={mode},ignore-error=true")
        if cache_repo and trust.registry_write:
            # image-manifest/oci-mediatypes: cache stored as an OCI image manifest, which GHCR,
            # ECR and Docker Hub all accept (the default index form is refused by some).
            cache_to.append(f"type=registry,ref={cache_repo}:{key},mode={mode},ignore-error=true,"
                            "image-manifest=true,oci-mediatypes=true")

    tags: list[str] = []
    if staging:
        if trust.trusted:
            tags.append(f"{staging}:{ctx.sha}-{suffix}")
        else:
            tags.append(f"{staging}:{naming.sanitize_tag(f'{trust.scope}-{ctx.sha}', suffix=f'-{suffix}')}")
    push = bool(tags) and trust.registry_write

    source = f"{ctx.server_url.rstrip('/')}/{ctx.repository}"
    labels = {
        "org.opencontainers.image.source": source,
        "org.opencontainers.image.revision": ctx.sha,
        "org.opencontainers.image.title": image.name,
    }
    return Job(
        id=f"{image.name}-{arch}", image=image.name, arch=arch, platform=platform,
        runs_on=image.runners[arch], dockerfile=image.dockerfile, context=image.context, target=image.target,
        build_args=dict(image.build_args), staging_repository=staging or None, tags=tuple(tags), push=push,
        cache_from=tuple(cache_from), cache_to=tuple(cache_to), gha_scope=gha_scope, labels=labels,
        secrets=trust.secrets, base=image.base,
        identity_prefix=image.identity.prefix if image.identity else None,
        canonical_staging_repository=staging_template and naming.expand_repository(
            staging_template, image.name, canonical_owner),
        cache_mounts=plan_mounts(image.cache_mounts, image=image.name, arch_suffix=suffix,
                                 read_scopes=trust.read_scopes, canonical_scope=trust.canonical_scope,
                                 write_scope=trust.write_scope, registry_write=trust.registry_write,
                                 cache_repo=cache_repo or None, canonical_cache_repo=canonical_cache_repo or None),
    )


PUBLISHING_EVENTS = ("push", "schedule", "workflow_dispatch")


def publishing_refusal(ctx: GitHubContext, options: Options) -> str | None:
    """Why this run may not move published tags or delete them (None: it may). Only a trusted push,
    schedule or dispatch on the stable branch of the canonical repository publishes."""
    if ctx.event not in PUBLISHING_EVENTS:
        return (f"a {ctx.event} run never publishes (only {', '.join(PUBLISHING_EVENTS)} on the stable branch "
                "of the canonical repository)")
    trust, _ = decide_trust(ctx, options)
    if not trust.trusted:
        return f"not a trusted run: {trust.reason}"
    return None


def base_refs(plan: Plan, job: Job, identity: str) -> BaseRefs:
    """The canonical `<prefix>-<identity>` first, then this scope's own ref; only a trusted
    run writes the canonical one. An untrusted run writes `<scope>-<prefix>-<identity>` in its own
    namespace, so nothing outside the trusted branch can put bytes behind a canonical identity tag.
    """
    if not job.identity_prefix:
        raise UsageError(f"--image {job.image}: not content-addressed (no [images.{job.image}.identity])")
    if not job.staging_repository or not job.canonical_staging_repository:
        raise UsageError(f"--image {job.image}: a content-addressed image needs a staging repository "
                         "(registries.staging or images.<name>.staging)")
    trust = plan.trust
    canonical = f"{job.canonical_staging_repository}:{naming.sanitize_tag(f'{job.identity_prefix}-{identity}')}"
    if trust.trusted:
        return BaseRefs(read=(canonical,), write=canonical if trust.registry_write else None)
    own_tag = naming.sanitize_tag(trust.scope, suffix=f"-{job.identity_prefix}-{identity}")
    own = f"{job.staging_repository}:{own_tag}"
    return BaseRefs(read=(canonical, own), write=own if trust.registry_write else None)


def plan(ctx: GitHubContext, options: Options, images: list[str] | None = None,
         arches: list[str] | None = None) -> Plan:
    """The build plan for this context: one job per image and platform, filtered by image/arch."""
    for name in images or []:
        if name not in options.images:
            raise UsageError(f"--image {name}: no such image in {options.config_path} "
                             f"(known: {', '.join(options.images)})")
    trust, warnings = decide_trust(ctx, options)
    selected = set(images or options.images)
    selected |= {base for name in selected if (base := options.images[name].base)}
    jobs = []
    fork_pr = ctx.event in PR_EVENTS and bool(ctx.is_fork) and not options.trust.self_hosted_for_forks
    for image in options.images.values():
        if image.name not in selected:
            continue
        for platform in image.platforms:
            if arches and PLATFORM_ARCH[platform] not in arches:
                continue
            job = _job(ctx, options, trust, image, platform)
            if fork_pr and not github_hosted(job.runs_on, options.trust.hosted_runner_labels):
                # A fork's code never runs on a persistent runner (its Dockerfile RUN steps, a privileged
                # GPU container): GitHub's hosted runners are thrown away, self-hosted ones are not.
                warnings.append(f"{job.id}: not planned for a pull request from a fork: it would run the fork's "
                                f"code on a runner that is not GitHub-hosted ({', '.join(job.runs_on)}; "
                                "trust.self-hosted-for-forks)")
                continue
            jobs.append(job)
    return Plan(context=ctx, trust=trust, jobs=tuple(jobs), warnings=tuple(warnings))
