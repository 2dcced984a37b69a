"""`ghbuild init`: adopt ghbuild in an existing repository.

Reads the repository (its Dockerfiles, their stages, the git remote) and writes two files, the config
`ghbuild.toml` and the caller workflow `.github/workflows/images.yml`, pinned to the ghbuild that runs
this; and says, per Dockerfile, which lines give its compile steps sccache (the helper-image contract
of docs/building.md, "Your Dockerfile: three lines for sccache"), as instructions or as a patch. It never
edits a Dockerfile itself, and never overwrites a file without `force`. Everything is checked (the
config is loaded like any other) before the first byte is written.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ghbuild import __version__, naming
from ghbuild.config import configfile
from ghbuild.config.options import DEFAULT_SCCACHE_HELPER_IMAGE
from ghbuild.errors import InvalidReferenceError, UsageError
from ghbuild.github.git import git_output
from ghbuild.plan import dockerfile

CONFIG_FILE = configfile.CONFIG_FILE
WORKFLOW_FILE = ".github/workflows/images.yml"
DEFAULT_PLATFORMS = ("linux/amd64", "linux/arm64")
HELPER_STAGE = "ghbuild-sccache"
HELPER_ARG = "GHBUILD_SCCACHE_IMAGE"
HELPER_MOUNTS = (f"--mount=type=bind,from={HELPER_STAGE},source=/,target=/opt/ghbuild",
                 "--mount=type=secret,id=ghbuild_sccache,required=false")
WRAPPER = "/opt/ghbuild/bin/ghbuild-sccache"
_DOCKERFILE_NAME = re.compile(r"^(Dockerfile|Containerfile)(\..+)?$|^.+\.(Dockerfile|dockerfile|Containerfile)$")
# A RUN that builds native code: a build system or a compiler in command position (after env
# assignments), not a package name in `apt-get install g++ cmake` or in a quoted string. The command's
# physical lines are joined with _LINE (a continued line's start is no command position of its own).
_LINE = "\x00"
_SEPARATOR = r"(?:^|[;&|(]|\bthen|\bdo|\belse)"
_ASSIGNMENTS = r"[\s\x00]*(?:[A-Za-z_]\w*=[^\s\x00]*[\s\x00]+)*"
_COMPILERS = r"gcc|g\+\+|clang\+\+|clang|cc|c\+\+|rustc|nvcc|hipcc"
_COMPILES = re.compile(rf"(?:{_SEPARATOR}|\s-c\s+['\"]){_ASSIGNMENTS}"
                       rf"(?:cmake|make|ninja|meson|cargo|{_COMPILERS}|bazel|scons)(?![\w.+-])")
# A compiler called by name, not through a build system: the wrapper's launchers (CMake's, Cargo's) never reach
# it, so init puts the launcher in front, outside quotes only (a quoted word is text, a nested shell's command is
# left alone). Unquoted: empty when sccache is off, and the compiler runs alone.
_DIRECT_COMPILER = re.compile(rf"{_SEPARATOR}{_ASSIGNMENTS}(?P<compiler>{_COMPILERS})(?![\w.+-])")
LAUNCHER = "$GHBUILD_SCCACHE_LAUNCHER"
_RUN_FLAG = re.compile(r"--[a-z-]+=\S+")
_SHELL_SYNTAX = set("&|;<>()$`\\\"'*?~#\n")
_SKIP_FOLDERS = {"node_modules", "vendor", "third_party", "3rdparty"}


@dataclass(frozen=True)
class Pin:
    """Which ghbuild the caller workflow and the schema comment refer to: a repository at a ref."""

    repository: str      # owner/name on GitHub
    ref: str             # a full commit sha, or a release tag v<version>
    source: str          # where it came from, said to the user

    @property
    def schema_url(self) -> str:
        return f"https://raw.githubusercontent.com/{self.repository}/{self.ref}/ghbuild/resources/ghbuild.schema.json"


@dataclass(frozen=True)
class CompileStep:
    stage: str
    first_line: int      # 0-based physical lines of the RUN instruction
    last_line: int
    replacement: str     # the RUN through the wrapper, as lines to write


@dataclass(frozen=True)
class FoundDockerfile:
    path: str                    # relative to the repository root, posix
    image: str                   # the image name it gets in ghbuild.toml
    target: str | None           # its last stage, when named
    platforms: tuple[str, ...]
    first_from: int              # 0-based line of the first FROM: the helper lines go above it
    has_helper: bool             # already follows the contract
    steps: tuple[CompileStep, ...]
    skipped: tuple[str, ...]     # compile steps init cannot rewrite (heredocs), said to the user


@dataclass(frozen=True)
class Adoption:
    root: Path
    repository: str | None       # the canonical repository, from the git remote
    dockerfiles: tuple[FoundDockerfile, ...]
    pin: Pin
    config_text: str
    workflow_text: str


# --------------------------------------------------------------------------- which ghbuild runs this


def toolkit_pin(explicit: str | None, distribution=None) -> Pin:
    """The ghbuild to pin: `--pin OWNER/NAME@REF`; else the commit pip installed it from (git URL), the
    commit of the checkout it runs from, or the tag of its release."""
    if explicit:
        repository, _, ref = explicit.partition("@")
        try:
            repository = naming.normalize_slug(repository)
        except InvalidReferenceError as exc:
            raise UsageError(f"--pin {explicit}: {exc}") from None
        if not re.fullmatch(r"[0-9a-f]{40}|v?\d[\w.+-]*", ref or ""):
            raise UsageError(f"--pin {explicit}: give OWNER/NAME@<40-hex commit> (or @v<version>)")
        return Pin(repository, ref, "--pin")
    if distribution is None:
        try:
            distribution = metadata.distribution("ghbuild")
        except metadata.PackageNotFoundError:
            distribution = None
    upstream = _project_repository(distribution)
    direct = json.loads(distribution.read_text("direct_url.json") or "{}") if distribution else {}
    vcs = direct.get("vcs_info") or {}
    if vcs.get("vcs") == "git" and re.fullmatch(r"[0-9a-f]{40}", vcs.get("commit_id", "")):
        return Pin(_slug_or(direct.get("url"), upstream), vcs["commit_id"], f"pip installed it from {direct['url']}")
    checkout = Path(__file__).resolve().parents[1]
    sha = git_output(["rev-parse", "HEAD"], checkout) if (checkout / ".git").exists() else None
    if sha:
        return Pin(_slug_or(git_output(["remote", "get-url", "origin"], checkout), upstream), sha,
                   f"the checkout it runs from ({checkout})")
    if upstream and re.fullmatch(r"\d+(\.\d+)*((a|b|rc)\d+)?", __version__):
        return Pin(upstream, f"v{__version__}", f"its release {__version__}")
    raise UsageError(f"cannot tell which ghbuild commit this is (version {__version__}): pass --pin OWNER/NAME@SHA")


def _project_repository(distribution) -> str | None:
    for entry in (distribution.metadata.get_all("Project-URL") or []) if distribution else []:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "source":
            return _slug_or(url.strip(), None)
    return None


def _slug_or(url: str | None, fallback: str | None) -> str:
    try:
        return naming.normalize_slug(url) if url else (fallback or "")
    except InvalidReferenceError:
        if fallback:
            return fallback
        raise UsageError(f"{url} is not a GitHub repository: pass --pin OWNER/NAME@SHA") from None


# --------------------------------------------------------------------------- reading the repository


def find_dockerfiles(root: Path) -> list[str]:
    """Dockerfiles git knows of (tracked, or untracked and not ignored), else every one below root."""
    listed = git_output(["ls-files", "-z", "--cached", "--others", "--exclude-standard"], root)
    if listed is not None:
        names = [n for n in listed.split("\0") if n]
    else:
        names = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]
    found = []
    for name in names:
        parts = Path(name).parts
        if any(part.startswith(".") or part in _SKIP_FOLDERS for part in parts[:-1]):
            continue
        if _DOCKERFILE_NAME.match(parts[-1]) and (root / name).is_file():
            found.append(Path(name).as_posix())
    return sorted(found)


def image_name(path: str, repository_name: str, taken: set[str]) -> str:
    """Dockerfile.cpu and cpu.Dockerfile are `cpu`; a plain Dockerfile is named after its folder (the
    repository's name at the root)."""
    file = Path(path)
    stem = re.sub(r"^(Dockerfile|Containerfile)\.?|\.?(Dockerfile|dockerfile|Containerfile)$", "", file.name)
    raw = stem or (file.parent.name if str(file.parent) != "." else repository_name)
    name = re.sub(r"[^a-z0-9_-]+", "-", raw.lower()).strip("-_")[:36] or "image"
    unique, n = name, 2
    while unique in taken:
        unique, n = f"{name}-{n}", n + 1
    taken.add(unique)
    return unique


def read_dockerfile(root: Path, path: str, image: str, platforms: tuple[str, ...]) -> FoundDockerfile:
    text = (root / path).read_text("utf-8")
    _, stages = dockerfile.parse(root / path)
    if not stages:
        raise UsageError(f"{path}: no FROM line; is it a Dockerfile?")
    lines = text.splitlines()
    backtick = dockerfile.escape_character(text) == "`"    # wrap_run writes backslash continuations
    steps, skipped, froms = [], [], []
    for first, last, instruction in dockerfile.instructions(text):
        word = instruction.split(None, 1)[0].upper()
        if word == "FROM":
            froms.append(first)
            continue
        stage = stages[len(froms) - 1].label if froms else ""
        if word != "RUN" or WRAPPER in instruction:
            continue
        pieces = [line.strip().removesuffix("\\").strip() for line in lines[first: last + 1]]
        pieces = [piece for piece in pieces if piece and not piece.startswith("#")]
        pieces[0] = pieces[0][3:].strip()   # the RUN keyword
        # A heredoc's body is part of the RUN, a script: each of its lines is a command. Wrapped by hand.
        heredoc = bool(dockerfile.heredocs(instruction))
        parsed = None if heredoc else _run_command(pieces)
        command = parsed[1] if parsed else _command(pieces)[1]
        if not _COMPILES.search((";" if heredoc else _LINE).join(command)):
            continue
        by_hand = "a heredoc RUN" if heredoc else "the escape directive is a backtick" if backtick else None
        replacement = None if by_hand else wrap_run(pieces, stage, _indent(lines[first]))
        if replacement is None:
            skipped.append(f"{path}:{first + 1} (stage {stage}): {by_hand or 'a heredoc RUN'}; wrap its build "
                           "command by hand")
        else:
            steps.append(CompileStep(stage, first, last, replacement))
    # ROCm images are published for amd64 only.
    only_amd64 = any("rocm" in s.base.lower() for s in stages)
    return FoundDockerfile(path=path, image=image, target=stages[-1].name, first_from=froms[0] if froms else 0,
                           platforms=("linux/amd64",) if only_amd64 else platforms,
                           has_helper=any(s.name == HELPER_STAGE for s in stages),
                           steps=tuple(steps), skipped=tuple(skipped))


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _command(pieces: list[str]) -> tuple[list[str], list[str]]:
    """A RUN's (flags, command lines) from its physical lines, keyword removed."""
    flags: list[str] = []
    rest: list[str] = []
    for piece in pieces:
        while not rest and (match := _RUN_FLAG.match(piece)):
            flags.append(match.group(0))
            piece = piece[match.end():].lstrip()
        if piece:
            rest.append(piece)
    return flags, rest


def _run_command(pieces: list[str]) -> tuple[list[str], list[str], bool] | None:
    """A RUN's (flags, command lines as a shell reads them, exec form): an exec-form RUN's argv becomes one
    shell line. Text that only starts like one (`[ -f x ] && make`) is shell form, as BuildKit reads it. None
    for a heredoc."""
    flags, lines = _command(pieces)
    text = " ".join(lines)
    if not lines or text.startswith("<<"):
        return None
    try:
        argv = json.loads(text) if text.startswith("[") else None
    except json.JSONDecodeError:
        argv = None
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        return flags, lines, False
    return flags, [shlex.join(argv)], True


def _launched(command: str) -> str:
    """The command with the launcher before each compiler it calls by name outside quotes."""
    unquoted = dockerfile.outside_quotes(command)
    at = [m.start("compiler") for m in _DIRECT_COMPILER.finditer(command)
          if unquoted[m.start()] and unquoted[m.start("compiler")]]
    for position in reversed(at):
        command = f"{command[:position]}{LAUNCHER} {command[position:]}"
    return command


def wrap_run(pieces: list[str], stage: str, indent: str = "") -> str | None:
    """The RUN through the wrapper: the helper and secret mounts, the RUN's own flags, then
    `ghbuild-sccache run STAGE -- <command>`, a shell command as `sh -c '<command>'` (as RUN runs it),
    its lines kept, a compiler called by name behind the launcher. None for a heredoc."""
    parsed = _run_command(pieces)
    if parsed is None:
        return None
    flags, lines, exec_form = parsed
    launched = _launched(_LINE.join(lines)).split(_LINE)
    # The launcher is set only inside the wrapper: a line that names it runs in the wrapper's own shell.
    exec_form = exec_form and launched == lines
    lines, text = launched, " ".join(launched)
    if exec_form or not _SHELL_SYNTAX.intersection(text):
        command = text
    elif len(lines) == 1 or "'" in text:
        command = f"sh -c {shlex.quote(text)}"
    else:   # Docker joins the continued lines before the shell sees them, inside the quotes too
        command = "sh -c ' \\\n" + " \\\n".join(f"{indent}        {line}" for line in lines) + "'"
    parts = [*HELPER_MOUNTS, *flags, f"{WRAPPER} run {stage} -- {command}"]
    return f"{indent}RUN " + f" \\\n{indent}    ".join(parts)


# --------------------------------------------------------------------------- what init writes


def adopt(root: Path, pin: Pin, platforms: tuple[str, ...] = DEFAULT_PLATFORMS) -> Adoption:
    """Read the repository and render both files; writes nothing."""
    unknown = [p for p in platforms if p not in DEFAULT_PLATFORMS]
    if unknown:
        raise UsageError(f"--platform {', '.join(unknown)}: not one of {', '.join(DEFAULT_PLATFORMS)}")
    origin = git_output(["remote", "get-url", "origin"], root)
    try:
        repository = naming.normalize_slug(origin) if origin else None
    except InvalidReferenceError:
        repository = None
    paths = find_dockerfiles(root)
    if not paths:
        raise UsageError(f"no Dockerfile in {root} (looked for Dockerfile, Dockerfile.*, *.Dockerfile, "
                         "Containerfile); run init at the root of the repository that holds them")
    repository_name = (repository or root.resolve().name).split("/")[-1]
    taken: set[str] = set()
    found = tuple(read_dockerfile(root, p, image_name(p, repository_name, taken), platforms) for p in paths)
    config_text = render_config(found, repository, repository_name, pin)
    # The same checks as every other command: a config init wrote must load.
    configfile.from_data(tomllib.loads(config_text), root / CONFIG_FILE, {})
    return Adoption(root, repository, found, pin, config_text, render_workflow(pin))


def _toml(value) -> str:
    return json.dumps(value)   # a TOML basic string / array of them is JSON's syntax


def render_config(found: tuple[FoundDockerfile, ...], repository: str | None, repository_name: str, pin: Pin) -> str:
    base = re.sub(r"[^a-z0-9_.-]+", "-", repository_name.lower()).strip("-._") or "project"
    canonical = (f"canonical-repository = {_toml(repository)}   # only its stable branch writes shared caches "
                 "and per-commit tags" if repository else
                 '# canonical-repository = "owner/name"   # no GitHub remote "origin" found: set it')
    out = [
        f"#:schema {pin.schema_url}",
        f"# ghbuild configuration, written by `ghbuild init` (ghbuild {__version__}).",
        "# Every key can be set by a GHBUILD_* variable, or the `overrides` input of ghbuild's reusable workflows.",
        "",
        "[trust]",
        canonical,
        "",
        "[registries]",
        "# {owner}: the lower-cased owner of the repository the workflow runs in, so a fork writes to its own.",
        f'cache = "ghcr.io/{{owner}}/{base}-cache"',
        f'staging = "ghcr.io/{{owner}}/{base}-{{image}}"',
        f'# publish = "docker.io/{(repository or "owner/x").split("/")[0].lower()}/{{image}}"   '
        "# nightlies and releases (the nightly and release workflows)",
        "",
        "[sccache]",
        "enabled = true",
        f'# bucket = "{base}-sccache"   # S3 bucket for the compile cache; without one, the builder\'s disk',
        '# region = "us-east-1"',
    ]
    for item in found:
        out += ["", f"[images.{item.image}]", f"dockerfile = {_toml(item.path)}", 'context = "."']
        if item.target:
            out.append(f"target = {_toml(item.target)}")
        out.append(f"platforms = {_toml(list(item.platforms))}")
    return "\n".join(out) + "\n"


def render_workflow(pin: Pin) -> str:
    return f"""\
# Container images, built by ghbuild's reusable workflow: plan, build per arch, push per-commit tags.
# Written by `ghbuild init`; what it needs and what forks get: {pin.repository}'s README,
# "Adopt ghbuild in your repository".
name: images

on:
  push:
  pull_request:
  workflow_dispatch:

permissions: {{}}

jobs:
  images:
    uses: {pin.repository}/.github/workflows/build-images.yml@{pin.ref} # ghbuild {__version__}
    permissions:
      contents: read
      packages: write       # per-commit images and the layer cache on GHCR
      actions: read         # the build reads the Actions cache usage against its budget
      id-token: write       # only the trusted build jobs ask for it: keyless signing, the AWS role below
    with:
      # An AWS role for the sccache bucket, assumed with the trusted job's OIDC token: no stored keys
      # (docs/trust.md, "Keyless AWS credentials"); or leave it empty and set the two secrets.
      aws-role-to-assume: ${{{{ vars.GHBUILD_AWS_ROLE_ARN }}}}
    secrets:
      aws-access-key-id: ${{{{ secrets.AWS_ACCESS_KEY_ID }}}}
      aws-secret-access-key: ${{{{ secrets.AWS_SECRET_ACCESS_KEY }}}}
"""


def patched(root: Path, item: FoundDockerfile) -> str:
    """The Dockerfile with the contract's lines added: what the patch and the instructions show."""
    lines = (root / item.path).read_text("utf-8").splitlines()
    for step in sorted(item.steps, key=lambda s: s.first_line, reverse=True):
        lines[step.first_line: step.last_line + 1] = step.replacement.splitlines()
    if not item.has_helper and item.steps:
        lines[item.first_from: item.first_from] = [*header_lines(), ""]
    return "\n".join(lines) + "\n"


def header_lines() -> list[str]:
    return [f"ARG {HELPER_ARG}={DEFAULT_SCCACHE_HELPER_IMAGE}", f"FROM ${{{HELPER_ARG}}} AS {HELPER_STAGE}"]


def diff(root: Path, item: FoundDockerfile) -> str:
    before = (root / item.path).read_text("utf-8").splitlines(keepends=True)
    return "".join(difflib.unified_diff(before, patched(root, item).splitlines(keepends=True),
                                        f"a/{item.path}", f"b/{item.path}"))


def instructions(item: FoundDockerfile) -> str:
    """What to change in one Dockerfile, in words and lines to paste."""
    if not item.steps:
        return f"{item.path}: no compile step found (nothing to add)\n"
    out = []
    if not item.has_helper:
        out.append(f"{item.path}: add above line {item.first_from + 1} (the first FROM):")
        out += [f"    {line}" for line in header_lines()]
    for step in item.steps:
        out.append(f"{item.path}: stage {step.stage}, line {step.first_line + 1}: run the build through the wrapper:")
        out += [f"    {line}" for line in step.replacement.splitlines()]
    return "\n".join(out) + "\n"


def existing(adoption: Adoption) -> list[str]:
    """The files init writes that are there already, relative to the repository root."""
    return [str(path.relative_to(adoption.root)) for path in _targets(adoption) if path.exists() or path.is_symlink()]


def _targets(adoption: Adoption) -> dict[Path, str]:
    return {adoption.root / CONFIG_FILE: adoption.config_text, adoption.root / WORKFLOW_FILE: adoption.workflow_text}


def kept_message(files: list[str]) -> str:
    return f"{' and '.join(files)} already exist{'s' if len(files) == 1 else ''}: nothing written"


def write(adoption: Adoption, force: bool) -> list[Path]:
    """Write ghbuild.toml and the caller workflow; refused, before either is written, when one exists."""
    targets = _targets(adoption)
    if (found := existing(adoption)) and not force:
        raise UsageError(f"{kept_message(found)} (pass --force to overwrite)")
    for path, text in targets.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.ghbuild-init")
        temporary.write_text(text, "utf-8")
        if path.is_symlink():   # replace the link itself, never write through it
            path.unlink()
        os.replace(temporary, path)
    return list(targets)
