"""The suite needs nothing beside the repository: what a user's fresh clone has is enough."""

from __future__ import annotations

import ast
import importlib
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import OUTSIDE_READS, REPO, outside_repository


def _up(node: ast.AST, source: Path) -> Path | None:
    """The folder an expression such as ``Path(__file__).resolve().parents[1].parent`` names, or None."""
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        base = _up(node.value, source)
        return base.parent if base else None
    if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "parents"
            and isinstance(node.slice, ast.Constant)):
        base = _up(node.value.value, source)
        return base.parents[node.slice.value] if base else None
    method = node.func.attr if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) else None
    if method in ("resolve", "absolute"):
        return _up(node.func.value, source)
    if isinstance(node, ast.Call) and ast.unparse(node) == "Path(__file__)":
        return source.resolve()
    return None


@pytest.mark.slow
def test_no_path_built_from_a_file_leaves_the_repository():
    sources = sorted(p for folder in ("tests", "explorer", "model", "benchmarks", "tools")
                     for p in (REPO / folder).rglob("*.py"))
    assert len(sources) > 50
    for source in sources:
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            path = _up(node, source)
            assert path is None or path == REPO or REPO in path.parents, (
                f"{source.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)} is {path}, outside the repository")


def test_no_test_module_holds_a_path_outside_the_repository():
    roots = {REPO, Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}  # the clone, Python's own
    for source in sorted((REPO / "tests").glob("test_*.py")):
        module = importlib.import_module(source.stem)
        for name, value in vars(module).items():
            values = value if isinstance(value, (list, tuple)) else [value]
            for v in values:
                if isinstance(v, Path) and v.is_absolute():
                    resolved = v.resolve()
                    assert roots & {resolved, *resolved.parents}, f"{source.name}: {name} = {v}"


def test_reading_beside_the_repository_is_refused_and_recorded(tmp_path):
    if str(REPO.parent) in (tempfile.gettempdir(), sys.prefix):
        pytest.skip("a clone directly in the temp folder: what is beside it are temp files")
    beside = REPO.parent / "shared" / "README.md"
    assert outside_repository(str(beside)) and not outside_repository(str(REPO / "README.md"))
    assert not outside_repository(str(tmp_path / "x")) and not outside_repository(str(REPO.parent / ".cache" / "x"))
    before = len(OUTSIDE_READS)
    with pytest.raises(PermissionError, match="may not read outside the repository"):
        open(beside, encoding="utf-8")  # noqa: SIM115 (the open itself is refused)
    assert OUTSIDE_READS[before:] == [str(beside)]
    del OUTSIDE_READS[before:]  # this one was the test's own


def test_ci_runs_exactly_the_readme_s_test_command_in_a_fresh_clone():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    command = next(line for line in readme.splitlines() if line.startswith("python3 -m venv") and "pytest" in line)
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert command in ci.splitlines()
    assert "git clone" in ci and "mktemp -d" in ci  # run in a new folder with nothing beside it


SIBLING = b"shared"  # the developers' folder beside the clone (spelled apart: this file must not name it)
SKIPPED = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", "build", "dist", "runs"}


def _project_files() -> list[Path]:
    """The files of the project: those git tracks or would track (not what it ignores: a virtual
    environment, build output such as the egg-info's copy of an older README); without git, every
    file outside the usual build and cache folders."""
    import subprocess

    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                             capture_output=True, check=True).stdout
        return [REPO / name for name in sorted(set(out.decode().split("\0"))) if name and (REPO / name).is_file()]
    except (OSError, subprocess.CalledProcessError):
        return [p for p in sorted(REPO.rglob("*")) if p.is_file() and not SKIPPED & set(p.relative_to(REPO).parts)
                and not any(part.endswith(".egg-info") for part in p.parts)]


@pytest.mark.slow
def test_no_file_names_a_path_into_the_developers_folder_beside_the_clone():
    """No source, document, fixture or shipped checkpoint (whose metadata records its training
    command) names a path into the folder that only the developers' machines have beside the clone:
    a user's clone has nothing there, so such a path is a dead end or a read that fails."""
    import re

    pattern = re.compile(rb"\.\./" + SIBLING + rb"\b|(?<![\w/.])" + SIBLING + rb"/(data|fixtures)/")
    found, files = [], 0
    for path in _project_files():
        rel = path.relative_to(REPO)
        if path.stat().st_size > 50_000_000:
            continue
        files += 1
        for match in pattern.finditer(path.read_bytes()):
            found.append(f"{rel}: {match.group().decode()}")
    assert files > 200
    assert not found, found
