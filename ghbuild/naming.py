"""Names: repository slugs, tag sanitising, cache scopes and image references.

Pure functions, no I/O. The tag rules follow the OCI distribution spec: a tag matches
`[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`. Patterns end in `\\Z`, not `$`: Python's `$` also matches
before a final newline, which would let "name\\n" (a YAML block scalar in a GHBUILD_* variable) pass.
"""

from __future__ import annotations

import re

from ghbuild.errors import InvalidReferenceError

TAG_MAX = 128
TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
_TAG_BAD_CHARS = re.compile(r"[^A-Za-z0-9_.-]")
# Length of the hash appended when sanitising changed a name: 10 hex = 40 bits,
# enough that distinct branch names of one repository do not collide in practice.
_HASH_HEX = 10

_SLUG_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}\Z")
_SLUG_PREFIXES = ("https://github.com/", "http://github.com/", "git@github.com:", "ssh://git@github.com/",
                  "ssh://git@github.com:", "github.com/")

# distribution/reference grammar
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_REPOSITORY_RE = re.compile(rf"^(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*\Z")
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}\Z")
# Docker Hub's names: what users write, and the host its registry API answers on.
DOCKER_HUB_HOSTS = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})
DOCKER_HUB_REGISTRY = "registry-1.docker.io"


def short_hash(text: str, length: int = 12) -> str:
    import hashlib  # OpenSSL's start-up (3 ms): not for the many commands that parse names only

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:length]


def normalize_slug(value: str) -> str:
    """`owner/name` from a slug or a GitHub URL, lower-cased (GitHub names are case-insensitive).

    Accepts https://github.com/o/r(.git)(/), git@github.com:o/r.git, ssh://git@github.com/o/r.
    Raises InvalidReferenceError for anything that is not a repository slug.
    """
    raw = value
    slug = value.strip()
    lowered = slug.lower()
    for prefix in _SLUG_PREFIXES:
        if lowered.startswith(prefix):
            slug = slug[len(prefix):]
            break
    slug = slug.rstrip("/")
    if slug.lower().endswith(".git"):
        slug = slug[:-4]
    slug = slug.rstrip("/")
    if not _SLUG_RE.match(slug):
        raise InvalidReferenceError(f"{raw!r} is not a GitHub repository (expected owner/name)")
    return slug.lower()


def sanitize_tag(raw: str, suffix: str = "", limit: int = TAG_MAX) -> str:
    """A valid tag of at most `limit` characters that ends with `suffix`.

    Characters outside [A-Za-z0-9._-] become `_`; a leading `.` or `-` becomes `_`. When that
    changed the text, or the text had to be cut to leave room for the suffix, a short hash of
    the raw text is appended (before the suffix), so that names differing only in punctuation
    or beyond the cut never collide. The suffix is always kept whole, inside the limit.
    """
    if suffix and not re.fullmatch(r"[A-Za-z0-9_.-]+", suffix):
        raise InvalidReferenceError(f"tag suffix {suffix!r} has characters a tag cannot hold")
    room = limit - len(suffix)
    if room < _HASH_HEX + 2:
        raise InvalidReferenceError(f"tag suffix {suffix!r} leaves no room in {limit} characters")
    body = _TAG_BAD_CHARS.sub("_", raw)
    if body[:1] in (".", "-"):
        body = "_" + body[1:]
    if body == raw and 0 < len(body) <= room:
        return body + suffix
    digest = short_hash(raw, _HASH_HEX)
    keep = room - len(digest) - 1
    body = body[:keep].rstrip("-.") or "_"
    return f"{body}-{digest}{suffix}"


def validate_tag(tag: str, where: str = "tag") -> str:
    if not TAG_RE.match(tag):
        raise InvalidReferenceError(f"{where}: {tag!r} is not a valid tag")
    return tag


UNTRUSTED_SUFFIX = "-untrusted"


def untrusted_repository(name: str) -> str:
    """Where untrusted runs write what a trusted run writes to `name` (caches, per-commit and base-identity
    tags): a repository of its own, so that the trusted one can be made read-only to every credential an
    untrusted job holds (GHCR's per-package Actions access, a Docker Hub or ECR repository policy)."""
    return name + UNTRUSTED_SUFFIX


def validate_repository(name: str, where: str = "repository") -> str:
    """An image repository without tag or digest, e.g. ghcr.io/org/ci or 127.0.0.1:5000/x/y.

    A first component is a registry host only when it looks like one (a `.`, a `:port`, or localhost), as
    split_reference and Docker read it; otherwise it is a path component and must be lower-case: the
    grammar alone would take `UPPER/x` as a registry named UPPER. `where` prefixes the message ("": none)."""
    where = f"{where}: " if where else ""
    if not name or len(name) > 255 or not _REPOSITORY_RE.match(name):
        raise InvalidReferenceError(
            f"{where}{name!r} is not a valid image repository "
            "(lower-case path components, optional registry host, no tag)")
    first, slash, _ = name.partition("/")
    if slash and not _is_host(first) and first != first.lower():
        raise InvalidReferenceError(
            f"{where}{name!r} starts with {first!r}, which is neither a registry host (a host has a '.' or a "
            f"':port', or is localhost) nor a repository path (lower-case only): write {first.lower()!r} or a "
            "registry host")
    return name


def _is_host(component: str) -> bool:
    """Whether the first component of a name is a registry host (Docker's rule, also split_reference's)."""
    return "." in component or ":" in component or component == "localhost"


def is_image_reference(ref: str) -> bool:
    """True for what an engine knows an image by: an id (`sha256:<64 hex>`), `name@sha256:<64 hex>` or
    `name[:tag]`, each part valid by the reference grammar (no `..`, `?`, `%` or other URL syntax)."""
    if DIGEST_RE.match(ref) or is_digest_ref(ref):
        return True
    slash, colon = ref.rfind("/"), ref.rfind(":")
    name, tag = (ref[:colon], ref[colon + 1:]) if colon > slash else (ref, "latest")
    try:
        validate_repository(name)
    except InvalidReferenceError:
        return False
    return bool(TAG_RE.match(tag))


def is_digest_ref(ref: str) -> bool:
    """True for `name@sha256:<64 hex>` with a valid repository name."""
    name, sep, digest = ref.partition("@")
    if not sep or not DIGEST_RE.match(digest):
        return False
    try:
        validate_repository(name)
    except InvalidReferenceError:
        return False
    return True


def pr_scope(number: int, source_repository: str) -> str:
    """The isolated scope of a pull request: `pr-<N>-<12 hex of sha256(source repo slug)>`."""
    return f"pr-{number}-{short_hash(source_repository)}"


def preview_scope(repository: str, branch: str) -> str:
    """The isolated scope of a branch that is not trusted: `preview-<branch, cut to 24>-<12 hex>`.

    The hash covers repository and branch (joined by `:`, which neither a slug nor a git ref
    can hold at that place unambiguously), so the same branch name in two forks never collides.
    """
    cut = _TAG_BAD_CHARS.sub("_", branch)[:24].strip("-.") or "_"
    return f"preview-{cut}-{short_hash(repository + ':' + branch)}"


def merge_queue_scope(repository: str, base_branch: str) -> str:
    """One scope for all merge-queue entries of a base branch (entries are short-lived)."""
    cut = _TAG_BAD_CHARS.sub("_", base_branch)[:24].strip("-.") or "_"
    return f"mq-{cut}-{short_hash(repository + ':' + base_branch)}"


def canonical_scope(stable_branch: str) -> str:
    """The trusted scope: the stable branch's name (sanitised)."""
    return sanitize_tag(stable_branch, limit=64)


def split_reference(ref: str) -> tuple[str, str, str]:
    """`host/repo:tag` or `host/repo@sha256:..` -> (host, repo, tag-or-digest); Docker Hub by default."""
    name, sep, digest = ref.partition("@")
    if sep:
        tag = digest
    else:
        slash = name.rfind("/")
        colon = name.rfind(":")
        name, tag = (name[:colon], name[colon + 1:]) if colon > slash else (name, "latest")
    first, _, rest = name.partition("/")
    if rest and _is_host(first):
        return first, rest, tag
    return "docker.io", name, tag


def split_repository(name: str) -> tuple[str, str]:
    """`host[:port]/path` -> (host, path); a name without a registry host is on Docker Hub."""
    host, path, _ = split_reference(name)
    return host, path


def pinned(ref: str, digest: str) -> str:
    """`name:tag` + digest -> `name@digest` (the tag dropped: the digest is what is meant)."""
    name = ref.partition("@")[0]
    slash, colon = name.rfind("/"), name.rfind(":")
    return f"{name[:colon] if colon > slash else name}@{digest}"


def expand_repository(template: str, image: str, owner: str) -> str:
    """Fill {image} and {owner} (lower-cased: registries take lower-case paths only)."""
    return template.replace("{image}", image).replace("{owner}", owner.lower())
