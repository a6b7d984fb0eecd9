"""The layering of docs/architecture.md, checked on the source: each layer imports only downward.

One import name, ``newsflow``. Its layers, lowest first: ``newsflow.schemas`` (records and Arrow schemas),
``newsflow.core`` (pure logic: no redis, no subprocess, no argparse, no Beam), ``newsflow.storage`` (every
Redis and Parquet touch), ``newsflow.runtime`` (settings and the Redis connection), then the tiers
``newsflow.transforms``/``pipelines``/``jobs`` (Beam), ``newsflow.crawler`` and ``newsflow.serving`` (no
Beam, never each other), and ``newsflow.cli`` on top. No module reads the environment at import time
(settings are resolved by each command, see ``newsflow.runtime.settings``).
"""

from __future__ import annotations

import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# subpackage -> its directory in the repository (setup.py's package_dir)
DIRS = {
    "schemas": "schemas",
    "core": "newsflow/core",
    "storage": "newsflow/storage",
    "runtime": "newsflow/runtime",
    "transforms": "transforms",
    "pipelines": "pipelines",
    "jobs": "jobs",
    "crawler": "crawler",
    "serving": "serving",
    "cli": "cli",
}
TIERS = ("transforms", "pipelines", "jobs", "crawler", "serving", "cli")
PURE_FORBIDDEN = ("redis", "subprocess", "multiprocessing", "argparse", "apache_beam")

# subpackage -> (third-party or stdlib modules it may not import, newsflow subpackages it may not import)
FORBIDDEN = {
    "schemas": (PURE_FORBIDDEN, ("core", "storage", "runtime") + TIERS),
    "core": (PURE_FORBIDDEN, ("storage", "runtime") + TIERS),
    "storage": (("subprocess", "multiprocessing", "argparse", "apache_beam"), ("runtime",) + TIERS),
    "runtime": (("apache_beam",), TIERS),
    "crawler": (("apache_beam",), ("serving", "transforms", "pipelines", "jobs", "cli")),
    "serving": (("apache_beam",), ("crawler", "transforms", "pipelines", "jobs", "cli")),
    "transforms": ((), ("pipelines", "jobs", "crawler", "serving", "cli")),
    "pipelines": ((), ("jobs", "crawler", "serving", "cli")),
    "jobs": ((), ("crawler", "serving", "cli")),
}
_PATH_STRING = re.compile(r"\bnewsflow\.(" + "|".join(TIERS + ("runtime",)) + r")\b")


def _modules(package: str):
    for dirpath, _, files in os.walk(os.path.join(ROOT, DIRS[package])):
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    yield os.path.relpath(path, ROOT), f.read()


def _imports(tree: ast.AST):
    """(line, dotted module name) of every absolute import, ``from newsflow import x`` as ``newsflow.x``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "newsflow":
                for alias in node.names:
                    yield node.lineno, f"newsflow.{alias.name}"
            else:
                yield node.lineno, node.module


def violations(package: str, source: str) -> list[tuple[int, str]]:
    """(line, imported module) pairs of ``source`` that break ``package``'s rule in :data:`FORBIDDEN`."""
    libraries, layers = FORBIDDEN[package]
    bad = []
    for lineno, name in _imports(ast.parse(source)):
        parts = name.split(".")
        if parts[0] in libraries or (parts[0] == "newsflow" and len(parts) > 1 and parts[1] in layers):
            bad.append((lineno, name))
    return bad


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_downward(package):
    bad = [f"{rel}:{n} imports {name}" for rel, source in _modules(package) for n, name in violations(package, source)]
    assert bad == []


def test_the_checker_sees_upward_and_forbidden_imports():
    source = "import redis\nfrom newsflow.storage.keys import Keys\nfrom newsflow import serving\nimport numpy\n"
    assert violations("core", source) == [(1, "redis"), (2, "newsflow.storage.keys"), (3, "newsflow.serving")]
    assert violations("storage", "import numpy\nimport redis\n") == []


@pytest.mark.parametrize("package", ["schemas", "core"])
def test_core_names_no_upper_layer_module_path(package):
    bad = [
        f"{rel}:{i}: {line.strip()}"
        for rel, source in _modules(package)
        for i, line in enumerate(source.splitlines(), 1)
        if _PATH_STRING.search(line)
    ]
    assert bad == []


def test_one_import_name_installed():
    """setup.py installs every tier under ``newsflow`` and nothing else at the top level."""
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        setup = f.read()
    tiers = ast.literal_eval(re.search(r"^TIERS = (\[.*?\])$", setup, re.M).group(1))
    assert sorted(tiers) == sorted(d for d in DIRS.values() if "/" not in d)


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
    for package in DIRS:
        for rel, source in _modules(package):
            bad += [f"{rel}:{n}" for n in _module_level_env_reads(ast.parse(source))]
    assert bad == []


def test_the_env_checker_sees_a_module_level_read():
    assert _module_level_env_reads(
        ast.parse("import os\nX = os.environ.get('A')\ndef f():\n    return os.getenv('B')\n")
    ) == [2]
