"""No dead code in the product: every module-level name of ``components/`` and ``pipelines/`` is referenced somewhere.

The names a product module defines are looked up in the repository's code (product, ``scripts/``, ``benchmarks/``,
``tests/``, ``conftest.py``, ``pyproject.toml``): in Python files the code counts (names, attributes, imports,
keywords, words of string constants), not docstrings or comments; other text files count whole. A name defined in
several modules is alive when used more often than defined. What only outsiders reach goes into :data:`ALLOWED`
with its reason. The same scan without the tests finds test-only product code (:data:`TESTS_ONLY_ALLOWED`).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("components", "pipelines")
REFERENCING = (*PRODUCT, "scripts", "benchmarks", "tests")
TEXT_SUFFIXES = (".sh", ".toml", ".yaml", ".yml", ".cfg", ".txt", ".json")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: Names used only from outside the repository, by ``path:name``, each with why it stays. Empty today: the KFP
#: entry points are used by the pipelines, the CLI's ``main`` by ``pyproject.toml``'s ``[project.scripts]``, the
#: pytest hooks live in tests (not product), and the public names of each ``__init__`` are imported there.
ALLOWED: dict[str, str] = {}
#: Public API the product itself does not call (only the tests and the users' code do), by ``path:name``, with why.
TESTS_ONLY_ALLOWED: dict[str, str] = {
    "components/_common/workspace.py:default_pipeline_config": "README: a user's own @dsl.pipeline's PVC settings",
    "components/data_processing/dataset_download/validate.py:validate_dataset_uri": (
        "the dataset_download README's Python entry point (the CLI's validate-dataset runs the whole step)"
    ),
}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module and of its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.add(id(first.value))
    return found


def code_words(source: str) -> list[str]:
    """The names a Python source uses or defines, and the words of its string constants (docstrings left out)."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    words: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif isinstance(node, ast.alias):
            words += node.name.split(".")
            if node.asname:
                words.append(node.asname)
        elif isinstance(node, ast.ImportFrom) and node.module:
            words += node.module.split(".")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            words.append(node.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words += _WORD.findall(node.value)
        elif isinstance(node, ast.keyword) and node.arg:
            words.append(node.arg)
    return words


def definitions(source: str) -> list[tuple[str, int]]:
    """The module-level functions, classes and assigned names of a source (dunder names left out), with their line."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [target.id for target in node.targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        else:
            names = []
        found += [(name, node.lineno) for name in names if not name.startswith("__")]
    return found


def unreferenced(
    root: Path, product: tuple[str, ...], referencing: tuple[str, ...], allowed: dict[str, str] | None = None
) -> list[str]:
    """``path:line name`` of every product definition that nothing in ``referencing`` uses, sorted.

    A ``tests`` folder counts only where ``referencing`` names it (``tests``, or a folder above a component's
    ``tests/``): leave ``tests`` out of ``referencing`` and the components' tests are left out too.
    """
    include_tests = "tests" in referencing

    def files(folders: tuple[str, ...]) -> list[Path]:
        return sorted(
            path
            for folder in folders
            for path in (root / folder).rglob("*")
            if path.is_file() and ".venv" not in path.parts and path.name != "pipeline.yaml"
            if include_tests or "tests" not in path.relative_to(root).parts
        )

    uses: Counter[str] = Counter()
    roots = [root / "conftest.py", root / "pyproject.toml"] if include_tests else [root / "pyproject.toml"]
    for path in [*files(referencing), *roots]:
        if not path.is_file():
            continue
        if path.suffix == ".py":
            uses.update(code_words(path.read_text(encoding="utf-8")))
        elif path.suffix in TEXT_SUFFIXES:
            uses.update(_WORD.findall(path.read_text(encoding="utf-8", errors="replace")))
    defined: Counter[str] = Counter()
    sites: list[tuple[str, str]] = []
    for path in files(product):
        if path.suffix != ".py" or "tests" in path.relative_to(root).parts:
            continue
        for name, line in definitions(path.read_text(encoding="utf-8")):
            defined[name] += 1
            sites.append((name, f"{path.relative_to(root)}:{line}"))
    allowed = ALLOWED if allowed is None else allowed
    return sorted(
        f"{site} {name}"
        for name, site in sites
        if uses[name] <= defined[name] and f"{site.rsplit(':', 1)[0]}:{name}" not in allowed
    )


def test_no_unreferenced_functions_classes_or_constants_in_the_product():
    dead = unreferenced(ROOT, PRODUCT, REFERENCING)
    assert dead == [], "dead code (delete it, or put it in ALLOWED with the reason): " + ", ".join(dead)


def test_no_product_code_only_the_tests_use():
    """Test-only code lives in ``tests/`` (``tests/harness/``), not in the product: what the product, the scripts and
    the benchmarks never use is either public API (:data:`TESTS_ONLY_ALLOWED`) or belongs to the tests."""
    only_tests = unreferenced(ROOT, PRODUCT, (*PRODUCT, "scripts", "benchmarks"), {**ALLOWED, **TESTS_ONLY_ALLOWED})
    assert only_tests == [], "product code only the tests use (move it to tests/harness/): " + ", ".join(only_tests)


def test_every_allowed_name_still_exists():
    defined = {
        f"{path.relative_to(ROOT)}:{name}"
        for folder in PRODUCT
        for path in (ROOT / folder).rglob("*.py")
        for name, _ in definitions(path.read_text(encoding="utf-8"))
    }
    assert set(ALLOWED) | set(TESTS_ONLY_ALLOWED) <= defined


def test_the_check_finds_what_only_its_docstring_or_comment_names(tmp_path):
    """The check is not blind: an unused function, class or constant is found, even when prose mentions it."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "scripts").mkdir()
    (tmp_path / "lib" / "mod.py").write_text(
        '"""Module; see :func:`dead_function` and :data:`DEAD`."""\n'
        "import json\n"
        "DEAD = 1  # DEAD is only named here\n"
        "USED_IN_SCRIPT = 2\n"
        "__all__ = ['exported']\n"
        "def dead_function():\n"
        '    """dead_function names itself."""\n'
        "def exported():\n    return _helper()\n"
        "def _helper():\n    return json.dumps(1)\n"
        "class DeadClass:\n    pass\n"
    )
    (tmp_path / "scripts" / "run.sh").write_text("python -c 'from lib.mod import USED_IN_SCRIPT'\n")
    dead = unreferenced(tmp_path, ("lib",), ("lib", "scripts"))
    assert dead == ["lib/mod.py:12 DeadClass", "lib/mod.py:3 DEAD", "lib/mod.py:6 dead_function"]


def test_the_check_finds_what_only_the_tests_use(tmp_path):
    """Left out of ``referencing``, the tests (a component's own ``tests/`` included) keep nothing alive."""
    (tmp_path / "lib" / "tests").mkdir(parents=True)
    (tmp_path / "tests").mkdir()
    (tmp_path / "lib" / "mod.py").write_text("def used():\n    return 1\ndef tested_only():\n    return used()\n")
    (tmp_path / "lib" / "tests" / "test_mod.py").write_text("from lib.mod import tested_only\n")
    (tmp_path / "tests" / "test_more.py").write_text("from lib.mod import tested_only\n")
    assert unreferenced(tmp_path, ("lib",), ("lib", "tests"), {}) == []
    assert unreferenced(tmp_path, ("lib",), ("lib",), {}) == ["lib/mod.py:3 tested_only"]
