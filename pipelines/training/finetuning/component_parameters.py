"""What each component says about its own parameters: type, default and description — the one source of each.

A component's signature (``component.py``) holds its defaults and its ``parameter_docs.py`` its descriptions; the
pipeline table (:mod:`.parameters`) adds only what differs per algorithm or flavor. Both files are read as source text
(``ast``), not imported: importing the components loads KFP and the runtime bundler (~1.3 s), which ``kfp-finetune``'s
start, ``doctor`` and the README generator need not pay. ``tests/test_parameter_sources.py`` checks this reading
against the imported components' real signatures and docstrings.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from pathlib import Path
from typing import Any

#: Marker for a parameter without default (the dashboard requires a value).
REQUIRED = object()
#: The component of each pipeline step: its folder (relative to the repository root) and its function's name.
COMPONENTS = {
    "dataset": ("components/data_processing/dataset_download", "dataset_download"),
    "train": ("components/training/finetuning", "train_model"),
    "eval": ("components/evaluation/lm_eval", "lm_eval"),
    "registry": ("components/deployment/kubeflow_model_registry", "model_registry"),
}
_TYPES = {t.__name__: t for t in (str, int, float, bool, list, dict)}
_ROOT = Path(__file__).resolve().parents[3]


@dataclasses.dataclass(frozen=True)
class ComponentParameter:
    """A run-time parameter as its component declares it.

    Attributes:
        annotation: Its type (``str``, ``int``, ``float``, ``bool``, ``list`` or ``dict``).
        default: Its default, or :data:`REQUIRED`.
        description: Its description (whitespace collapsed), "" when the component documents none.
    """

    annotation: type
    default: Any
    description: str


def _function(tree: ast.Module, name: str, path: Path) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise LookupError(f"{path} defines no function {name!r}")


def _parameter_docs(directory: Path) -> dict[str, str]:
    """``PARAMETER_DOCS`` of ``directory/parameter_docs.py`` (a literal dict), whitespace collapsed."""
    tree = ast.parse((directory / "parameter_docs.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "PARAMETER_DOCS" for t in node.targets):
            return {name: " ".join(text.split()) for name, text in ast.literal_eval(node.value).items()}
    raise LookupError(f"{directory / 'parameter_docs.py'} has no PARAMETER_DOCS dict")


@functools.cache
def component_parameters(step: str) -> dict[str, ComponentParameter]:
    """The plain-typed parameters (no artifacts, no placeholders) of the component of ``step``, by name.

    Raises:
        KeyError: ``step`` is not one of :data:`COMPONENTS`.
    """
    folder, function = COMPONENTS[step]
    path = _ROOT / folder / "component.py"
    args = _function(ast.parse(path.read_text()), function, path).args
    docs = _parameter_docs(path.parent)
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    found = {}
    for arg, default in zip(positional + args.kwonlyargs, defaults + list(args.kw_defaults), strict=True):
        annotation = _TYPES.get(arg.annotation.id) if isinstance(arg.annotation, ast.Name) else None
        if annotation is None:
            continue  # an artifact
        try:
            value = REQUIRED if default is None else ast.literal_eval(default)
        except ValueError:
            continue  # a placeholder the pipeline fills (e.g. dsl.PIPELINE_JOB_ID_PLACEHOLDER)
        found[arg.arg] = ComponentParameter(annotation, value, docs.get(arg.arg, ""))
    return found
