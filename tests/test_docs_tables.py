"""The documentation as an entry point: the README stays short, its generated tables say what the workflow,
action and error files say (infra/doc_tables.py), every action and reusable workflow has its table, and every
relative link in README.md, CONTRIBUTING.md and docs/ leads to a file (and a heading, when it names one)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infra import doc_tables

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_MAX_LINES = 300
DOCS = doc_tables.doc_files(ROOT)
LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1\s*$", re.M | re.S)


def callable_workflows() -> list[str]:
    return [str(path.relative_to(ROOT)) for path in sorted((ROOT / ".github" / "workflows").glob("*.yml"))
            if "workflow_call" in (doc_tables.load_yaml(path).get("on") or {})]


def actions() -> list[str]:
    return [str(path.relative_to(ROOT)) for path in sorted((ROOT / ".github" / "actions").glob("*/action.yml"))]


def test_the_readme_is_an_entry_point_of_at_most_300_lines():
    lines = README.read_text("utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move a topic to docs/"


def test_the_readme_has_the_promise_the_caller_the_flow_the_exit_codes_and_the_links():
    text = README.read_text("utf-8")
    for heading in ("## The flow", "## Adopt ghbuild in your repository", "## The caller workflow",
                    "## Errors and exit codes", "## Reference: reusable workflows and actions", "## Documentation"):
        assert f"\n{heading}\n" in text, heading
    assert "event → config → plan → bases → build → records → publish → retention" in text
    assert "```yaml\n" in text.split("## The caller workflow", 1)[1].split("\n## ", 1)[0]
    for page in ("trust", "configuration", "building", "bases", "publishing", "forks"):
        assert f"(docs/{page}.md" in text, page
    assert "(CONTRIBUTING.md)" in text


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_generated_table_is_what_its_file_says(doc):
    text = doc.read_text("utf-8")
    fresh, stale = doc_tables.regenerate(text, ROOT)
    assert stale == [], f"{doc.name}: stale {stale}: run `python -m infra.doc_tables`"
    assert fresh == text


def test_every_reusable_workflow_and_action_has_a_table():
    marked = {source for doc in DOCS for kind, source in doc_tables.markers(doc.read_text("utf-8"))
              if kind != "exit-codes"}
    assert set(callable_workflows()) and set(actions())
    assert sorted((set(callable_workflows()) | set(actions())) - marked) == []
    readme = {source for _, source in doc_tables.markers(README.read_text("utf-8"))}
    assert set(callable_workflows()) <= readme and "ghbuild/errors.py" in readme


def test_the_readme_exit_codes_are_generated_from_errors_py():
    from ghbuild import errors

    assert ("exit-codes", "ghbuild/errors.py") in doc_tables.markers(README.read_text("utf-8"))
    table = doc_tables.table("exit-codes", "ghbuild/errors.py", ROOT)
    assert [row.split(" | ")[0].strip("| ") for row in table[2:]] == [str(c) for c, _, _ in errors.exit_codes()]


def test_an_input_added_without_regenerating_is_a_stale_table_check_names(tmp_path):
    """A copy of the repository's docs and YAML, one input added to the caller's reusable workflow: `--check`
    fails and names the table; a run without it rewrites the table, and `--check` passes again."""
    for rel in ["README.md", "ghbuild/errors.py", *callable_workflows(), *actions()]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    workflow = tmp_path / ".github" / "workflows" / "build-images.yml"
    text = workflow.read_text("utf-8")
    anchor = "    inputs:\n"
    assert text.count(anchor) >= 1
    workflow.write_text(text.replace(anchor, anchor + "      new-knob:\n        description: 'A new <knob> | pipe.'\n"
                                     "        type: string\n        required: false\n        default: x\n", 1))
    readme = (tmp_path / "README.md").read_text("utf-8")
    fresh, stale = doc_tables.regenerate(readme, tmp_path)
    assert stale == ["interface:.github/workflows/build-images.yml"]
    assert "| input | `new-knob` | `x` (string) | A new &lt;knob> \\| pipe. |" in fresh

    check = [sys.executable, "-m", "infra.doc_tables", "--root", str(tmp_path), "--check", str(tmp_path / "README.md")]
    proc = subprocess.run(check, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 1 and "stale table interface:.github/workflows/build-images.yml" in proc.stderr
    assert (tmp_path / "README.md").read_text("utf-8") == readme            # --check writes nothing
    write = [sys.executable, "-m", "infra.doc_tables", "--root", str(tmp_path), str(tmp_path / "README.md")]
    assert subprocess.run(write, capture_output=True, text=True, cwd=ROOT, timeout=60).returncode == 0
    assert (tmp_path / "README.md").read_text("utf-8") == fresh
    assert subprocess.run(check, capture_output=True, text=True, cwd=ROOT, timeout=60).returncode == 0


def test_a_marker_naming_no_action_or_workflow_is_an_error():
    for text, message in (("<!-- BEGIN interface:ci.yml -->\n<!-- END interface:ci.yml -->", "no such file"),
                          ("<!-- BEGIN interface:.github/workflows/ci.yml -->\n"
                           "<!-- END interface:.github/workflows/ci.yml -->", "not a reusable workflow"),
                          ("<!-- BEGIN rows:README.md -->\n<!-- END rows:README.md -->", "unknown table kind"),
                          ("<!-- BEGIN inputs:README.md -->\n", "without its END")):
        with pytest.raises(doc_tables.DocTableError, match=message):
            doc_tables.regenerate(text, ROOT)


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file (lower case, punctuation dropped, spaces as -,
    a repeated heading numbered)."""
    seen: dict[str, int] = {}
    anchors = set()
    for line in FENCE.sub("", markdown).splitlines():
        match = re.match(r"^#{1,6} +(.+?) *#* *$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def links(doc: Path) -> list[str]:
    text = FENCE.sub("", doc.read_text("utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)
    return [target for target in LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", target)]


@pytest.mark.parametrize("doc", [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))],
                         ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading(doc):
    broken = []
    for target in links(doc):
        path_part, _, anchor = target.partition("#")
        path = (doc.parent / path_part).resolve() if path_part else doc
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in github_anchors(path.read_text("utf-8")):
            broken.append(f"{target}: no such heading")
    assert broken == []


def test_the_docs_tree_has_a_page_per_topic():
    for page in ("trust", "configuration", "building", "bases", "publishing", "forks", "actions", "benchmarks"):
        assert (ROOT / "docs" / f"{page}.md").is_file(), page
    contributing = (ROOT / "CONTRIBUTING.md").read_text("utf-8")
    for target in ("venv", "unit", "lint", "test", "demo", "bench", "infra-up", "infra-down"):
        assert f"`make {target}`" in contributing or f"`make {target}` /" in contributing, target
    layout = contributing.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    packages = sorted(path.parent.name for path in (ROOT / "ghbuild").glob("*/__init__.py"))
    assert [name for name in packages if f"| `{name}/` |" not in layout] == []
