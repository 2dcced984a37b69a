"""The package's shape, checked from its source with `ast`: the pipeline stages as sub-packages, no import
cycle, pure modules that import no I/O, and the size limits the codebase keeps (CONTRIBUTING.md, "Layout")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ghbuild"
STAGES = ("github", "config", "plan", "bases", "build", "publish", "retention", "registry", "http")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
MAX_LOCAL_IMPORTS = 30
# Pure: no I/O of their own and nothing imported that does it (they are tested on recorded inputs).
PURE = ("ghbuild.naming", "ghbuild.markdown", "ghbuild.plan.planner", "ghbuild.plan.dockerfile",
        "ghbuild.build.buildcmd", "ghbuild.build.buildlog", "ghbuild.build.ghacache", "ghbuild.build.audit",
        "ghbuild.retention.plan", "ghbuild.config.schema_check", "ghbuild.config.toml_position")
IO_MODULES = {"subprocess", "socket", "http", "urllib.request", "requests", "boto3", "botocore", "docker",
              "github", "shutil", "tempfile"}


def modules() -> dict[str, ast.Module]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_version.py":
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = ast.parse(path.read_text("utf-8"), str(path))
    return found


def imported(name: str, tree: ast.Module, top_level_only: bool) -> set[str]:
    """The ghbuild modules (and other top-level packages) a module imports."""
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out: set[str] = set()
    package = name if name in PACKAGES else name.rpartition(".")[0]
    for node in nodes:
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES)
        elif isinstance(node, ast.If) and top_level_only:
            continue    # `if TYPE_CHECKING:` blocks import nothing at run time
    return out


MODULES = modules()
PACKAGES = {name for name in MODULES if (PACKAGE.parent / name.replace(".", "/") / "__init__.py").exists()}


def test_the_pipeline_stages_are_sub_packages():
    assert [stage for stage in STAGES if f"ghbuild.{stage}" not in PACKAGES] == []


def test_no_module_over_the_line_limit():
    lines = {name: len(_source(name).splitlines()) for name in MODULES}
    assert {name: n for name, n in lines.items() if n > MAX_MODULE_LINES} == {}


def _source(name: str) -> str:
    path = PACKAGE.parent / name.replace(".", "/")
    return (path / "__init__.py" if name in PACKAGES else path.with_suffix(".py")).read_text("utf-8")


def test_no_function_over_the_line_limit():
    long = [f"{name}.{node.name}: {node.end_lineno - node.lineno + 1}"
            for name, tree in MODULES.items() for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert long == []


def test_imports_inside_functions_are_few():
    """Imports sit at the top; inside a function only for an optional extra or a command's own modules
    (start-up: `ghbuild plan` never imports the registry or the Docker SDK)."""
    local = _local_imports()
    assert len(local) <= MAX_LOCAL_IMPORTS, "\n".join(local)


def _local_imports() -> list[str]:
    seen: set[tuple[str, int]] = set()
    for name, tree in MODULES.items():
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                seen.update((name, node.lineno) for node in ast.walk(fn)
                            if isinstance(node, (ast.Import, ast.ImportFrom)))
    return [f"{name}:{line}" for name, line in sorted(seen)]


def _graph() -> dict[str, set[str]]:
    return {name: {dep for dep in imported(name, tree, top_level_only=True) if dep in MODULES and dep != name}
            for name, tree in MODULES.items()}


def test_no_import_cycle_at_module_level():
    graph = _graph()
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str], on_path: set[str], done: set[str]) -> None:
        for dep in sorted(graph[node]):
            if dep in on_path:
                cycles.append([*path[path.index(dep):], dep])
            elif dep not in done:
                visit(dep, [*path, dep], on_path | {dep}, done)
        done.add(node)

    done: set[str] = set()
    for name in sorted(graph):
        if name not in done:
            visit(name, [name], {name}, done)
    assert cycles == []


def test_no_import_cycle_between_modules_at_all():
    """Function-local imports count too: two modules that need each other are one concern, or a third module."""
    graph = {name: {dep for dep in imported(name, tree, top_level_only=False)
                    if dep in MODULES and dep != name and dep not in PACKAGES}
             for name, tree in MODULES.items()}
    pairs = sorted({tuple(sorted((a, b))) for a, deps in graph.items() for b in deps if a in graph.get(b, set())})
    assert pairs == []


@pytest.mark.parametrize("name", PURE)
def test_pure_modules_import_no_io(name):
    def closure(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            mod = todo.pop()
            if mod in seen:
                continue
            seen.add(mod)
            if mod in MODULES:
                todo.extend(imported(mod, MODULES[mod], top_level_only=False))
        return seen

    reached = closure(name)
    io = sorted(mod for mod in reached if mod.split(".")[0] in IO_MODULES or mod in IO_MODULES)
    assert io == [], f"{name} reaches {io}"


def test_the_checks_see_a_cycle_and_an_io_import():
    """The checks above on a made-up pair: a test that cannot fail is a defect."""
    a = ast.parse("from ghbuild import naming\nimport subprocess\n")
    assert "subprocess" in imported("ghbuild.x", a, top_level_only=True)
    assert "ghbuild.naming" in imported("ghbuild.x", a, top_level_only=True)


def test_mypy_checks_every_pure_module_strictly():
    import tomllib

    config = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text("utf-8"))
    strict = [o for o in config["tool"]["mypy"]["overrides"] if o.get("disallow_untyped_defs")]
    assert len(strict) == 1, "one override holds the strict rules of the pure modules"
    assert set(PURE) <= set(strict[0]["module"]), set(PURE) - set(strict[0]["module"])
    assert all(strict[0].get(rule) for rule in ("disallow_incomplete_defs", "disallow_any_generics", "warn_return_any"))
