"""The package layering of DESIGN.md, checked on the source: each tier imports only downward.

``newsflow/`` (the core) and ``schemas/`` name no tier above them, neither as an import nor as a
module-path string in a docstring; ``crawler/`` and ``serving/`` never import Beam or each other;
no module reads the environment at import time (settings are resolved by each command, see
``newsflow.settings``).
"""

from __future__ import annotations

import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UPPER = ("apache_beam", "pipelines", "serving", "jobs", "crawler", "transforms", "cli")

# package -> top-level packages it may not import
FORBIDDEN = {
    "schemas": UPPER + ("newsflow",),
    "newsflow": UPPER,
    "crawler": ("apache_beam", "pipelines", "serving", "jobs", "transforms", "cli"),
    "serving": ("apache_beam", "pipelines", "crawler", "jobs", "transforms", "cli"),
    "transforms": ("pipelines", "serving", "jobs", "crawler", "cli"),
    "pipelines": ("serving", "jobs", "crawler", "cli"),
    "jobs": ("serving", "crawler", "cli"),
}
_PATH_STRING = re.compile(r"\b(" + "|".join(UPPER) + r")[./][A-Za-z_]")


def _modules(package: str):
    for dirpath, _, files in os.walk(os.path.join(ROOT, package)):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    yield os.path.relpath(path, ROOT), f.read()


def _imports(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_downward(package):
    bad = []
    for rel, source in _modules(package):
        for lineno, top in _imports(ast.parse(source)):
            if top in FORBIDDEN[package]:
                bad.append(f"{rel}:{lineno} imports {top}")
    assert bad == []


@pytest.mark.parametrize("package", ["newsflow", "schemas"])
def test_core_names_no_upper_tier_module_path(package):
    bad = [
        f"{rel}:{i}: {line.strip()}"
        for rel, source in _modules(package)
        for i, line in enumerate(source.splitlines(), 1)
        if _PATH_STRING.search(line)
    ]
    assert bad == []


def _module_level_env_reads(tree: ast.Module) -> list[int]:
    """Line numbers of ``os.environ``/``os.getenv`` uses outside any function or class body."""
    lines = []

    def visit(node, inside_def: bool):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside_def = True
        if (
            not inside_def
            and isinstance(node, ast.Attribute)
            and node.attr in ("environ", "getenv")
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
        ):
            lines.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child, inside_def)

    visit(tree, False)
    return lines


def test_no_environment_read_at_import_time():
    bad = []
    for package in ("newsflow", "schemas", "transforms", "pipelines", "jobs", "crawler", "serving", "cli"):
        for rel, source in _modules(package):
            bad += [f"{rel}:{n}" for n in _module_level_env_reads(ast.parse(source))]
    assert bad == []


def test_the_env_checker_sees_a_module_level_read():
    assert _module_level_env_reads(
        ast.parse("import os\nX = os.environ.get('A')\ndef f():\n    return os.getenv('B')\n")
    ) == [2]
