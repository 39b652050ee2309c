"""How a component's runtime code reaches the pod.

Two delivery modes, chosen at compile time (module constants, overridable by environment variables):

* **Embedded (default).** The component's pure modules (its directory minus ``tests/`` and ``component.py``,
  plus the ``components/_common`` modules they import) are staged into a small ``components/`` tree and handed to KFP's
  ``embedded_artifact_path`` (kfp >= 2.15). KFP packs it as a gzip+base64 tarball into the component's command and
  puts the extraction root on ``sys.path`` in the pod, so ``import components.<category>.<name>.<module>`` works
  there exactly as it does locally. The package ``__init__`` files in the bundle are replaced by empty ones so that
  importing a pure module in the pod never imports ``kfp`` decorators again. Third-party packages come from
  ``packages_to_install`` on top of the component's image (:data:`BASE_IMAGE` unless the component names one that
  already carries its heavy dependencies, see ``components/_common/images.py``).
* **Prebuilt runtime image.** With ``KFP_FINETUNE_RUNTIME_IMAGE`` set (an image built from the project's
  ``Containerfile``, e.g. for disconnected clusters), components run on that image: nothing is embedded and nothing
  is pip-installed at run time.

The module-level components (``from components... import lm_eval``) are built with these defaults. A pipeline
compiled with other images calls ``component.with_image(image, prebuilt=...)``, which re-decorates the same function
for that compile (the image and the install list are part of the executor's command, so they cannot be swapped on a
built component); results are cached per image.

``KFP_FINETUNE_INSTALL_PACKAGES=0`` compiles components that install nothing at run time (no ``kfp`` either); the
test-suite and ``kfp-finetune demo`` use it because ``kfp.local`` runs tasks in the current, complete environment.
"""

from __future__ import annotations

import ast
import io
import os
import tempfile
import tokenize
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from components._common.images import PYTHON_IMAGE

#: Base image of the components that name no image of their own (the python.org build of CPython 3.11 on Debian 12).
DEFAULT_BASE_IMAGE = PYTHON_IMAGE
#: Compile-time override of :data:`DEFAULT_BASE_IMAGE` for the module-level components.
BASE_IMAGE = os.environ.get("KFP_FINETUNE_BASE_IMAGE", DEFAULT_BASE_IMAGE)
#: Prebuilt runtime image (see ``Containerfile``); empty means "embed the code and pip-install the packages".
RUNTIME_IMAGE = os.environ.get("KFP_FINETUNE_RUNTIME_IMAGE", "")
#: Whether compiled components pip-install their packages (and kfp) at run time.
INSTALL_PACKAGES = os.environ.get("KFP_FINETUNE_INSTALL_PACKAGES", "1") != "0"

#: The project's root package; runtime bundles are rooted here.
COMPONENTS_ROOT = Path(__file__).resolve().parents[1]
#: Fixed file time in bundles so that the packed tar is byte-stable from one compile to the next.
_BUNDLE_MTIME = 315532800  # 1980-01-01, the earliest time zip/tar tools agree on
#: Not needed in the pod: tests, caches, the KFP wrapper and the (compile-time) parameter descriptions.
_SKIPPED_NAMES = {"tests", "__pycache__", "component.py", "parameter_docs.py"}


def _docstring_nodes(tree: ast.AST) -> list[tuple[ast.Constant, bool]]:
    """The docstring literals of a module, its classes and functions, each with whether it is its body's only one."""
    owners = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, owners) and node.body and isinstance(node.body[0], ast.Expr):
            value = node.body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.append((value, len(node.body) == 1))
    return found


def _function_locals(function: ast.AST) -> list[ast.AST]:
    """The nodes of a function's own body: nested classes (their annotations are fields) and functions left out."""
    found, pending = [], list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        found.append(node)
        pending.extend(ast.iter_child_nodes(node))
    return found


def _without_signature_annotations(source: str, tree: ast.AST) -> str:
    """``source`` without one-line annotations of function parameters, returns and local variables (same lines).

    Nothing in the pods reads a function's annotations (with ``from __future__ import annotations`` they are strings
    anyway) and local ones are never evaluated; class and module annotations (dataclasses, structs) are kept.
    """
    lines = source.encode().splitlines(keepends=True)
    cuts: list[tuple[int, int, int]] = []  # (line index, start byte, end byte)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = node.args
        for arg in [*params.posonlyargs, *params.args, *params.kwonlyargs, params.vararg, params.kwarg]:
            if arg is None or arg.annotation is None or arg.annotation.end_lineno != arg.lineno:
                continue
            start = arg.col_offset + len(arg.arg.encode())
            if lines[arg.lineno - 1][start : arg.annotation.col_offset].strip() == b":":
                cuts.append((arg.lineno - 1, start, arg.annotation.end_col_offset))
        for inner in _function_locals(node):  # local variables' annotations are never evaluated (PEP 526)
            if isinstance(inner, ast.AnnAssign) and inner.value is not None and inner.simple:
                target, annotation = inner.target, inner.annotation
                if target.lineno == annotation.end_lineno:
                    cuts.append((target.lineno - 1, target.end_col_offset, annotation.end_col_offset))
        returns = node.returns
        if returns is not None and returns.lineno == returns.end_lineno:
            line = lines[returns.lineno - 1]
            arrow = line.rfind(b"->", 0, returns.col_offset)
            if arrow >= 0 and not line[arrow + 2 : returns.col_offset].strip():
                cuts.append((returns.lineno - 1, len(line[:arrow].rstrip()), returns.end_col_offset))
    for index, start, end in sorted(cuts, reverse=True):
        lines[index] = lines[index][:start] + lines[index][end:]
    return b"".join(lines).decode()


def slim_source(source: str) -> str:
    """``source`` without docstrings, comments and signature annotations, every line kept where it was.

    The pod needs the code, not its documentation: this cuts a bundle by about a third (Linux caps one argument at
    128 KiB, and the whole bundle is one argument). The module docstring keeps only its summary line where the module
    reads its ``__doc__`` (a script's ``--help`` shows it), and goes elsewhere; a class or function docstring goes
    (``...`` where it is the whole body; its ``__doc__`` is ``None`` in the pod); each leaves as many line breaks as it
    spanned, and a comment is cut from its line, so line numbers in a pod's traceback still point at the source in the
    repository. One-line annotations of function parameters and returns go too
    (:func:`_without_signature_annotations`). Source that does not parse, before or after, is returned unchanged.
    """
    original = source
    try:
        source = _without_signature_annotations(source, ast.parse(source))
        tree = ast.parse(source)
    except SyntaxError:
        return original
    lines = source.encode().splitlines(keepends=True)
    module_doc = tree.body[0].value if tree.body and isinstance(tree.body[0], ast.Expr) else None
    reads_doc = "__doc__" in source
    for node, alone in sorted(_docstring_nodes(tree), key=lambda n: (n[0].lineno, n[0].col_offset), reverse=True):
        first, last = node.lineno - 1, node.end_lineno - 1
        summary = (node.value.strip().splitlines() or [""])[0]
        if node is module_doc:
            kept = repr(summary).encode() if reads_doc else b""
        else:
            kept = b"..." if alone else b""
        kept += b"\n" * (last - first)
        lines[first : last + 1] = [lines[first][: node.col_offset] + kept + lines[last][node.end_col_offset :]]
    text = b"".join(lines).decode()
    text_lines = text.splitlines(keepends=True)
    comments = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.COMMENT]
    for token in reversed(comments):
        row, column = token.start
        line = text_lines[row - 1]
        ending = line[len(line.rstrip("\r\n")) :]
        text_lines[row - 1] = line[:column].rstrip() + ending
    slimmed = "".join(text_lines)
    try:
        compile(slimmed, "<bundle>", "exec", dont_inherit=True)
    except SyntaxError:
        return original
    return slimmed


def _shipped_files(source: Path) -> list[Path]:
    """The ``.py`` files under ``source`` that a pod may need (no tests, no KFP wrapper, no parameter docs)."""
    return [
        path
        for path in sorted(source.rglob("*.py"))
        if not any(part in _SKIPPED_NAMES for part in path.relative_to(source).parts)
    ]


def _common_imports(path: Path, function_bodies_only: bool = False) -> set[str]:
    """The ``components._common`` modules a source file imports (at any depth: lazy imports count).

    ``function_bodies_only``: count only imports inside functions (a ``component.py``, whose function body is what
    KFP runs in the pod; its module-level imports stay at compile time).
    """
    prefix = f"{COMPONENTS_ROOT.name}._common"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)] if function_bodies_only else [tree]
    found = set()
    for node in (inner for root in roots for inner in ast.walk(root)):
        if isinstance(node, ast.ImportFrom) and node.module == prefix:
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(prefix + "."):
            found.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            found |= {alias.name.split(".")[2] for alias in node.names if alias.name.startswith(prefix + ".")}
    return found


def needed_common_modules(component_dirs: Sequence[Path]) -> set[str]:
    """The ``components/_common`` modules the runtime code of ``component_dirs`` imports, transitively."""
    common = COMPONENTS_ROOT / "_common"
    pending = [path for directory in component_dirs for path in _shipped_files(Path(directory).resolve())]
    needed: set[str] = set()
    for directory in component_dirs:
        wrapper = Path(directory).resolve() / "component.py"
        if wrapper.is_file():
            pending += [common / f"{name}.py" for name in _common_imports(wrapper, function_bodies_only=True)]
    pending = [path for path in pending if path.is_file()]
    needed |= {path.stem for path in pending if path.parent == common}
    while pending:
        for name in _common_imports(pending.pop()) - needed:
            if (common / f"{name}.py").is_file():
                needed.add(name)
                pending.append(common / f"{name}.py")
    return needed


def _copy_module_tree(source: Path, target: Path, only: set[str] | None = None, excluded: Sequence[Path] = ()) -> None:
    """Copies the ``.py`` files under ``source`` to ``target``, skipping what the pod does not need.

    ``only``: module names (without ``.py``) to copy besides ``__init__.py``; ``None`` copies every module.
    ``excluded``: directories whose files are left out.
    """
    for path in _shipped_files(source):
        relative = path.relative_to(source)
        if only is not None and path.name != "__init__.py" and path.stem not in only:
            continue
        if any(path.is_relative_to(directory) for directory in excluded):
            continue
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        if path.name == "__init__.py":
            destination.write_text('"""Runtime bundle package."""\n')
        else:
            destination.write_text(slim_source(path.read_text(encoding="utf-8")), encoding="utf-8")


def _write_package_inits(bundle_root: Path, package_dir: Path) -> None:
    """Writes an empty ``__init__.py`` in every package between ``bundle_root`` and ``package_dir``."""
    current = package_dir
    while True:
        init = current / "__init__.py"
        if not init.exists():
            current.mkdir(parents=True, exist_ok=True)
            init.write_text('"""Runtime bundle package."""\n')
        if current == bundle_root:
            return
        current = current.parent


def stage_runtime_bundle(component_dirs: Sequence[Path], bundle_root: Path, excluded_dirs: Sequence[Path] = ()) -> Path:
    """Stages the runtime code of some component directories as an importable ``components`` tree.

    Args:
        component_dirs: Directories under ``components/`` whose pure modules the component imports at run time.
        bundle_root: An empty directory; it becomes the root put on ``sys.path`` in the pod.
        excluded_dirs: Directories inside ``component_dirs`` left out (code that cannot run on the bundle's image).

    Returns:
        ``bundle_root``, now holding ``components/__init__.py``, the ``components/_common`` modules the directories
        import (transitively; all of them when ``_common`` itself is one of the directories) and the modules of each
        directory at its usual import path.

    Raises:
        ValueError: A directory is not inside the ``components`` package.
    """
    package_root = bundle_root / COMPONENTS_ROOT.name
    common = COMPONENTS_ROOT / "_common"
    for directory in component_dirs:
        if COMPONENTS_ROOT not in Path(directory).resolve().parents:
            raise ValueError(f"runtime code must live under {COMPONENTS_ROOT}, got {Path(directory).resolve()}")
    only = None if common in {Path(d).resolve() for d in component_dirs} else needed_common_modules(component_dirs)
    excluded = [Path(directory).resolve() for directory in excluded_dirs]
    for source in [common, *component_dirs]:
        source = Path(source).resolve()
        target = package_root / source.relative_to(COMPONENTS_ROOT)
        _copy_module_tree(source, target, only if source == common else None, excluded)
        _write_package_inits(package_root, target)
    for path in [bundle_root, *bundle_root.rglob("*")]:
        os.utime(path, (_BUNDLE_MTIME, _BUNDLE_MTIME))
    return bundle_root


def with_parameter_docs(func: Callable[..., Any], parameter_docs: Mapping[str, str]) -> Callable[..., Any]:
    """Appends a Google ``Args:`` section built from ``parameter_docs`` to ``func``'s docstring.

    KFP turns that section into the parameter descriptions shown in the dashboard, and the README generator into the
    parameters table, while ``component.py`` stays a short wrapper.

    Raises:
        ValueError: ``parameter_docs`` names a parameter ``func`` does not have.
    """
    import inspect

    unknown = sorted(set(parameter_docs) - set(inspect.signature(func).parameters))
    if unknown:
        raise ValueError(f"parameter_docs of {func.__name__} name unknown parameters {unknown}")
    summary = inspect.cleandoc(func.__doc__ or func.__name__)
    lines = [f"    {name}: {' '.join(text.split())}" for name, text in parameter_docs.items()]
    func.__doc__ = summary + "\n\nArgs:\n" + "\n".join(lines) + "\n"
    return func


def runtime_component(
    component_file: str,
    packages: Sequence[str] = (),
    extra_dirs: Sequence[Path] = (),
    parameter_docs: Mapping[str, str] | None = None,
    image: str = "",
    needs_full_environment: Sequence[str] = (),
    string_routes: Mapping[str, str] | None = None,
    **component_kwargs: Any,
) -> Callable[[Callable[..., Any]], Any]:
    """A ``@dsl.component`` that ships the component's own modules into the pod.

    Args:
        component_file: ``__file__`` of the ``component.py`` being decorated; its directory is bundled.
        packages: Pinned third-party packages the component needs at run time on top of its image.
        extra_dirs: Further directories under ``components/`` the runtime code imports.
        parameter_docs: Descriptions of the parameters, by name, when the function's docstring has no ``Args:``
            section (see :func:`with_parameter_docs`).
        image: The component's default image ("" = :data:`BASE_IMAGE`); it must carry whatever ``packages`` leaves
            out (e.g. torch).
        needs_full_environment: Sub-directories of the component's directory whose code runs only where every
            dependency is present (the prebuilt runtime image, or ``kfp.local`` with ``INSTALL_PACKAGES`` off): left
            out of bundles that pip-install ``packages``, which lack them (and Linux caps the bundle's size).
        string_routes: ``{artifact input: string parameter input}``: a plain string (or string pipeline parameter)
            given for the artifact input is passed to the parameter input instead.
        **component_kwargs: Passed through to ``kfp.dsl.component`` (e.g. ``task_config_passthroughs``).

    Returns:
        A decorator turning the component function into a
        :class:`~components._common.runtime_components.RuntimeComponent` (a KFP ``PythonComponent``)
        whose ``with_image(image, prebuilt=False)`` returns the same component built for another image: with
        ``prebuilt=True`` the image is a complete runtime image (nothing embedded, nothing installed).
    """
    from kfp import dsl

    from components._common.runtime_components import RuntimeComponent

    routes = dict(string_routes or {})

    def decorate(func: Callable[..., Any]) -> Any:
        if parameter_docs:
            with_parameter_docs(func, parameter_docs)
        built: dict[tuple[str, bool, bool], Any] = {}

        def build(step_image: str, prebuilt: bool = False) -> Any:
            if not step_image:
                raise ValueError(f"{func.__name__}: the image must name a container image, got ''")
            key = (step_image, prebuilt, INSTALL_PACKAGES)
            if key not in built:
                built[key] = RuntimeComponent(_decorate(func, step_image, prebuilt), build, routes)
            return built[key]

        def _decorate(target: Callable[..., Any], step_image: str, prebuilt: bool) -> Any:
            if prebuilt:
                return dsl.component(target, base_image=step_image, install_kfp_package=False, **component_kwargs)
            with tempfile.TemporaryDirectory(prefix="kfp-finetune-bundle-") as staging:
                component_dir = Path(component_file).parent
                excluded = [component_dir / name for name in needs_full_environment] if INSTALL_PACKAGES else []
                stage_runtime_bundle([component_dir, *extra_dirs], Path(staging), excluded)
                return dsl.component(
                    target,
                    base_image=step_image,
                    packages_to_install=list(packages) if INSTALL_PACKAGES else None,
                    install_kfp_package=INSTALL_PACKAGES,
                    embedded_artifact_path=staging,
                    **component_kwargs,
                )

        if RUNTIME_IMAGE:
            return build(RUNTIME_IMAGE, prebuilt=True)
        return build(image or BASE_IMAGE)

    return decorate
