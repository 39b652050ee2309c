"""The wheel's layout: the repository's ``components`` and ``pipelines`` installed as ``kfp_finetune.components`` ...

Everything else about the distribution is in ``pyproject.toml``. A clone keeps the top-level packages the RHOAI guide
uses (``from components.training.finetuning import train_model``, ``python pipelines/training/<name>/pipeline.py``),
and so does the editable install of ``scripts/setup.sh``. A built wheel must not: a user's project with its own
``components/`` or ``pipelines/`` package would shadow it (or be shadowed). So the wheel build (:class:`BuildPy`, not
in editable mode) moves both packages under ``kfp_finetune/`` and rewrites their module references, the way pip
vendors its dependencies (``pip._vendor``): every absolute import of ``components``/``pipelines`` and every dotted
module path in a string literal (``"components.training.finetuning.pod.entrypoint"``, staged onto the training PVC;
the pipeline registry's module names) gets the ``kfp_finetune.`` prefix. Names computed at run time come from
``__name__``/``__package__`` (``pipelines/compile.py``), so they follow the rename without a rewrite.
Why a rewrite rather than another layout: relative imports cannot cross from ``pipelines`` to ``components`` (two
top-level packages), cannot run in the guide's ``python pipelines/training/<name>/pipeline.py`` (a script, no package)
nor in a KFP component's function body (KFP runs its source as a module of its own), and leave the module paths in
strings; a ``package_dir`` mapping alone renames the packages but not their absolute imports; pip's ``vendoring`` tool
copies downloaded third-party packages into a source tree (a step before the build, with regex rewrites), not the
project's own packages into a wheel at build time. The rewrite here is token-based
(``tokenize``), so comments and names that merely equal ``components`` (``from kfp import components``,
``spec["components"]``) are left alone.
``tests/test_wheel.py`` builds the wheel and checks it: no top-level ``components``/``pipelines``, no module
reference left unrewritten, and a user's project with its own ``components/`` imports every component and compiles
every pipeline from it.
"""

from __future__ import annotations

import io
import re
import shutil
import tokenize
from pathlib import Path

#: The distribution's own top-level package in a wheel.
WHEEL_PACKAGE = "kfp_finetune"
#: The repository's top-level packages, moved under :data:`WHEEL_PACKAGE` in a wheel.
MOVED_PACKAGES = ("components", "pipelines")
#: A dotted module path starting with a moved package inside a string literal (not ``x.components.y``, not the word
#: ``components`` alone as in ``spec["components"]``, not a sentence's ``components. The``).
_MODULE_PATH_IN_STRING = re.compile(rf"(?<![\w.])({'|'.join(MOVED_PACKAGES)})(?=\.[A-Za-z_])")
_STRING_TOKENS = {tokenize.STRING} | ({tokenize.FSTRING_MIDDLE} if hasattr(tokenize, "FSTRING_MIDDLE") else set())


class UnsupportedImportError(ValueError):
    """An import the rewrite cannot keep working (``import components.x`` binds the name ``components``)."""


def rewrite_module_references(source: str, filename: str = "<source>") -> str:
    """``source`` with every reference to a moved package prefixed by ``kfp_finetune.``.

    Rewritten: ``from components... import``, ``import components... as x`` and dotted module paths in string
    literals (docstrings included: their examples then name the wheel's imports). Comments are left alone.

    Raises:
        UnsupportedImportError: ``import components.x`` without ``as`` (it would bind ``kfp_finetune`` instead).
    """
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    edits: list[tuple[int, int, int, int, str]] = []  # (start row, col, end row, col, replacement)
    statement = ""  # the first keyword of the current logical line: "from", "import" or another
    for index, token in enumerate(tokens):
        if token.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT) or token.string == ";":
            statement = ""
        elif not statement and token.type not in (tokenize.NL, tokenize.COMMENT):
            statement = token.string
        if token.type == tokenize.NAME and token.string in MOVED_PACKAGES and index > 0:
            before = tokens[index - 1].string
            # `from components.x import y`, `import components.x as y` (not `from kfp import components`)
            if (statement == "from" and before == "from") or (statement == "import" and before in ("import", ",")):
                if statement == "import" and not _has_alias(tokens, index):
                    raise UnsupportedImportError(
                        f"{filename}:{token.start[0]}: 'import {token.string}...' without 'as' cannot be moved under "
                        f"{WHEEL_PACKAGE}; write 'from {token.string}... import name' instead"
                    )
                edits.append((*token.start, *token.end, f"{WHEEL_PACKAGE}.{token.string}"))
        elif token.type in _STRING_TOKENS and _MODULE_PATH_IN_STRING.search(token.string):
            edits.append((*token.start, *token.end, _MODULE_PATH_IN_STRING.sub(rf"{WHEEL_PACKAGE}.\1", token.string)))
    lines = source.splitlines(keepends=True)
    for start_row, start_col, end_row, end_col, text in reversed(edits):
        head, tail = lines[start_row - 1][:start_col], lines[end_row - 1][end_col:]
        lines[start_row - 1 : end_row] = [head + text + tail]
    return "".join(lines)


def _has_alias(tokens: list[tokenize.TokenInfo], index: int) -> bool:
    """Whether the dotted name starting at ``tokens[index]`` is followed by ``as``."""
    for token in tokens[index + 1 :]:
        if token.type == tokenize.NAME and token.string == "as":
            return True
        if not (token.type == tokenize.OP and token.string == ".") and token.type != tokenize.NAME:
            return False
    return False


def move_into_wheel_package(build_lib: Path) -> list[Path]:
    """Moves ``build_lib/components`` and ``build_lib/pipelines`` under ``build_lib/kfp_finetune`` and rewrites them.

    Returns:
        The rewritten ``.py`` files.
    """
    package_root = build_lib / WHEEL_PACKAGE
    for name in MOVED_PACKAGES:
        target = package_root / name
        if target.exists():
            shutil.rmtree(target)
        if (build_lib / name).exists():
            shutil.move(str(build_lib / name), str(target))
    rewritten = sorted(package_root.rglob("*.py"))
    for path in rewritten:
        source = path.read_text(encoding="utf-8")
        path.write_text(rewrite_module_references(source, str(path)), encoding="utf-8")
    return rewritten


if __name__ == "__main__":
    from setuptools import setup
    from setuptools.command.build_py import build_py

    class BuildPy(build_py):
        """``build_py`` that gives a wheel its own package name (an editable install keeps the clone's layout)."""

        def run(self) -> None:
            """Builds the packages into ``build_lib``; for a wheel, then moves and rewrites them there."""
            for name in (*MOVED_PACKAGES, WHEEL_PACKAGE):  # a previous build's tree in build/ must not leak in
                if not self.editable_mode and (Path(self.build_lib) / name).exists():
                    shutil.rmtree(Path(self.build_lib) / name)
            super().run()
            if not self.editable_mode:
                move_into_wheel_package(Path(self.build_lib))

    setup(cmdclass={"build_py": BuildPy})
