"""How a component's code reaches its pod: KFP's own embedding of the real source, or the project's step image.

One delivery mode per component, chosen at compile time (``docs/architecture.md``, *How code reaches each pod*):
**embedded** (:func:`stage_runtime_bundle` into KFP's ``embedded_artifact_path``, ``packages_to_install`` on top), or
the **prebuilt** step image (``train_model``, or every component with ``KFP_FINETUNE_RUNTIME_IMAGE``).
``KFP_FINETUNE_INSTALL_PACKAGES=0`` compiles components that install nothing, for ``kfp.local`` (tests, demo).
"""

from __future__ import annotations

import ast
import os
import shutil
import tempfile
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

#: The project's root package directory; runtime bundles hold its modules.
COMPONENTS_ROOT = Path(__file__).resolve().parents[1]
#: Its import name (``components`` in a clone, ``kfp_finetune.components`` in the wheel): a bundle's import path.
COMPONENTS_PACKAGE = __name__.rsplit(".", 2)[0]
#: Fixed file time in bundles, so that the packed tar's members do not change from one compile to the next.
_BUNDLE_MTIME = 315532800  # 1980-01-01, the earliest time zip/tar tools agree on
#: Not needed in the pod: tests, caches, the KFP wrapper and the (compile-time) parameter descriptions.
_SKIPPED_NAMES = {"tests", "__pycache__", "component.py", "parameter_docs.py"}


def _shipped_files(source: Path) -> list[Path]:
    """The ``.py`` files under ``source`` that a pod may need (no tests, no KFP wrapper, no parameter docs)."""
    return [
        path
        for path in sorted(source.rglob("*.py"))
        if not any(part in _SKIPPED_NAMES for part in path.relative_to(source).parts)
    ]


def _common_imports(path: Path, function_bodies_only: bool = False) -> set[str]:
    """The ``components._common`` modules a source file imports (lazy imports count; or only those in functions)."""
    prefix = f"{COMPONENTS_PACKAGE}._common"
    depth = prefix.count(".") + 1  # the index of the _common module's name in a dotted import path
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)] if function_bodies_only else [tree]
    found = set()
    for node in (inner for root in roots for inner in ast.walk(root)):
        if isinstance(node, ast.ImportFrom) and node.module == prefix:
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(prefix + "."):
            found.add(node.module.split(".")[depth])
        elif isinstance(node, ast.Import):
            found |= {alias.name.split(".")[depth] for alias in node.names if alias.name.startswith(prefix + ".")}
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


def stage_runtime_bundle(component_dirs: Sequence[Path], bundle_root: Path) -> Path:
    """Stages the runtime code of some component directories as an importable ``components`` tree.

    Args:
        component_dirs: Directories under ``components/`` whose pure modules the component imports at run time.
        bundle_root: An empty directory; it becomes the root put on ``sys.path`` in the pod.

    Returns:
        ``bundle_root``, holding the modules of each directory and the ``_common`` modules they import (all of them
        when ``_common`` is one of the directories), with empty package ``__init__`` files.

    Raises:
        ValueError: A directory is not inside the ``components`` package.
    """
    package_root = bundle_root.joinpath(*COMPONENTS_PACKAGE.split("."))
    top_package = bundle_root / COMPONENTS_PACKAGE.split(".")[0]
    common = COMPONENTS_ROOT / "_common"
    for directory in component_dirs:
        if COMPONENTS_ROOT not in Path(directory).resolve().parents:
            raise ValueError(f"runtime code must live under {COMPONENTS_ROOT}, got {Path(directory).resolve()}")
    only = None if common in {Path(d).resolve() for d in component_dirs} else needed_common_modules(component_dirs)
    for source in [common, *component_dirs]:
        source = Path(source).resolve()
        for path in _shipped_files(source):
            if path.name == "__init__.py" or (source == common and only is not None and path.stem not in only):
                continue
            destination = package_root / path.relative_to(COMPONENTS_ROOT)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, destination)
    for package in [top_package, *top_package.rglob("*")]:
        if package.is_dir():  # every package's __init__ empty: importing a module never runs a kfp decorator
            (package / "__init__.py").write_text('"""Runtime bundle package."""\n')
    for path in [bundle_root, *bundle_root.rglob("*")]:
        os.utime(path, (_BUNDLE_MTIME, _BUNDLE_MTIME))
    return bundle_root


def with_parameter_docs(func: Callable[..., Any], parameter_docs: Mapping[str, str]) -> Callable[..., Any]:
    """Appends a Google ``Args:`` section built from ``parameter_docs`` to ``func``'s docstring (KFP's descriptions).

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
    parameter_docs: Mapping[str, str] | None = None,
    image: str = "",
    prebuilt: bool = False,
    string_routes: Mapping[str, str] | None = None,
    **component_kwargs: Any,
) -> Callable[[Callable[..., Any]], Any]:
    """A ``@dsl.component`` that ships the component's own modules into the pod.

    Args:
        component_file: ``__file__`` of the ``component.py`` being decorated; its directory is bundled.
        packages: Pinned third-party packages the component needs at run time on top of its image.
        parameter_docs: Descriptions of the parameters, by name (see :func:`with_parameter_docs`).
        image: The component's default image ("" = :data:`BASE_IMAGE`); it must carry what ``packages`` leaves out.
        prebuilt: Whether ``image`` is a complete image of the project (``Containerfile``): nothing is embedded or
            installed, and every image it is rebuilt for (``with_image``) must be one too.
        string_routes: ``{artifact input: string parameter input}``, see ``RuntimeComponent``.
        **component_kwargs: Passed through to ``kfp.dsl.component``.

    Returns:
        A decorator turning the function into a :class:`~components._common.runtime_components.RuntimeComponent`.
    """
    from kfp import dsl

    from components._common.runtime_components import RuntimeComponent

    routes = dict(string_routes or {})
    declared_prebuilt = prebuilt

    def decorate(func: Callable[..., Any]) -> Any:
        if parameter_docs:
            with_parameter_docs(func, parameter_docs)
        built: dict[tuple[str, bool, bool], Any] = {}

        def build(step_image: str, prebuilt: bool = False) -> Any:
            if not step_image:
                raise ValueError(f"{func.__name__}: the image must name a container image, got ''")
            prebuilt = prebuilt or declared_prebuilt  # code too large to embed runs on a Containerfile image only
            key = (step_image, prebuilt, INSTALL_PACKAGES)
            if key not in built:
                built[key] = RuntimeComponent(_decorate(func, step_image, prebuilt), build, routes)
            return built[key]

        def _decorate(target: Callable[..., Any], step_image: str, prebuilt: bool) -> Any:
            if prebuilt:
                return dsl.component(target, base_image=step_image, install_kfp_package=False, **component_kwargs)
            with tempfile.TemporaryDirectory(prefix="kfp-finetune-bundle-") as staging:
                stage_runtime_bundle([Path(component_file).parent], Path(staging))
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
        return build(image or BASE_IMAGE, declared_prebuilt)

    return decorate
