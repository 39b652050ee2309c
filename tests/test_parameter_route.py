"""A pipeline parameter reaches the training pod in at most 4 files, under one name per layer.

``phase_02_train_man_train_epochs`` -> ``training_num_epochs`` (the component) -> ``num_epochs`` (the contract's
``TrainingOptions``) -> the pod's Training Hub call. A file carries the value when its code names it (either name, a
``num_epochs`` field, keyword or key); reading ``options.num_epochs`` or taking it as an argument only uses it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PIPELINE_NAME, COMPONENT_NAME, FIELD_NAME = "phase_02_train_man_train_epochs", "training_num_epochs", "num_epochs"
#: The route today, one file per layer.
ROUTE = {
    "pipelines/training/sft/pipeline.py",
    "components/training/finetuning/component.py",
    "components/training/finetuning/contract.py",
    "components/training/finetuning/pod/entrypoint.py",
}


def carries(source: str) -> bool:
    """Whether code names the value: the pipeline's or component's name, or the field declared, set or handed on."""
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, (ast.Name, ast.Attribute)):
            names = [getattr(node, "id", None) or node.attr]
            names = [name for name in names if name in (PIPELINE_NAME, COMPONENT_NAME)]
        elif isinstance(node, ast.arg):
            names = [node.arg] if node.arg != FIELD_NAME else []
        elif isinstance(node, ast.keyword) and node.arg:
            names = [node.arg]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        elif isinstance(node, ast.Dict):
            names = [key.value for key in node.keys if isinstance(key, ast.Constant) and key.value == FIELD_NAME]
        if {PIPELINE_NAME, COMPONENT_NAME, FIELD_NAME} & set(names):
            return True
    return False


def route_files(pipeline: str = "sft") -> set[str]:
    """The product files (no tests) on the route from ``pipeline``'s parameter to the pod (other pipelines apart)."""
    files = set()
    for folder in ("components", "pipelines"):
        for path in (ROOT / folder).rglob("*.py"):
            relative = path.relative_to(ROOT)
            if "tests" in relative.parts or ".venv" in relative.parts:
                continue
            if relative.parts[:2] == ("pipelines", "training") and relative.parts[2] not in (pipeline, "finetuning"):
                continue
            if carries(path.read_text(encoding="utf-8")):
                files.add(str(relative))
    return files


def test_training_num_epochs_reaches_the_pod_in_at_most_four_files():
    found = route_files()
    assert found == ROUTE, sorted(found)
    assert len(found) <= 4


def test_the_route_scan_sees_a_mirror_and_not_a_reader():
    """A flat mirror field or a copy under another name is caught; reading ``options.num_epochs`` is not a carrier."""
    assert carries("class Request:\n    training_num_epochs: int\n")
    assert carries("config = Config(num_epochs=request.epochs)\n")
    assert carries("kwargs = {'num_epochs': hp.num_epochs}\n")
    assert carries("def task(phase_02_train_man_train_epochs: int = 3): ...\n")
    assert not carries("total = steps * options.num_epochs\n")
    assert not carries("def totals(records, num_epochs=None):\n    return len(records) * num_epochs\n")
    assert not carries('"""The run\'s ``num_epochs`` and ``training_num_epochs``."""\n')
