"""Layering: pure manifests, no parameter bag below the component wrappers, kfp used through its public API only.

* ``manifests/`` builds Kubernetes objects from values: it imports neither the client layer (``cluster/``) nor the
  pod's code (``pod/``); ``publish.py`` does not import the CPU trainer (``local/``).
* The launcher <-> pod contract is one module, ``contract.py``: no launcher-side module (everything under
  ``components/training/finetuning`` but ``pod/`` and the pods' trainer ``hf_trainer/``) imports from ``pod/``, and
  the contract imports no launcher module.
* Below each ``component.py`` the arguments travel as one typed request: no ``params.get(`` anywhere.
* Nothing assigns to a ``kfp`` / ``kfp-kubernetes`` / ``kfp_server_api`` attribute, swaps an object's ``__class__`` or
  reaches a private (``_name``) kfp module or attribute, and importing the components (or the pipelines' modules)
  changes nothing in kfp.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FINETUNING = ROOT / "components" / "training" / "finetuning"


def _sources(*roots: Path) -> list[Path]:
    return sorted(
        path
        for root in roots
        for path in root.rglob("*.py")
        if "tests" not in path.relative_to(ROOT).parts and ".venv" not in path.parts
    )


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _imports(path: Path) -> set[str]:
    """Every module a file imports, anywhere in it (function bodies too), relative imports resolved."""
    package = _module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else _module_name(path)
    return _imports_of(path.read_text(), package)


def _imports_of(source: str, package: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _imported_from(node, package)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def test_manifests_import_neither_the_client_layer_nor_the_pod_code():
    files = _sources(FINETUNING / "manifests")
    assert len(files) >= 5
    forbidden = ("components.training.finetuning.cluster", "components.training.finetuning.pod")
    offending = {
        str(path.relative_to(ROOT)): sorted(m for m in _imports(path) if m.startswith(forbidden)) for path in files
    }
    assert {path: modules for path, modules in offending.items() if modules} == {}


POD = "components.training.finetuning.pod"
CONTRACT = "components.training.finetuning.contract"


def _launcher_side() -> list[Path]:
    return [
        path
        for path in _sources(FINETUNING)
        if path.relative_to(FINETUNING).parts[0] not in ("pod", "hf_trainer") and path.name != "contract.py"
    ]


def test_the_launcher_reaches_the_pods_code_through_the_contract_only():
    files = _launcher_side()
    assert {"run.py", "launch.py", "job_from_request.py", "runner.py", "progress.py", "trainer.py"} <= {
        path.name for path in files
    }
    offending = {
        str(path.relative_to(ROOT)): sorted(m for m in _imports(path) if m == POD or m.startswith(POD + "."))
        for path in files
    }
    assert {path: modules for path, modules in offending.items() if modules} == {}
    users = [path.name for path in files if any(m.startswith(CONTRACT) for m in _imports(path))]
    assert {"run.py", "launch.py", "progress.py"} <= set(users)  # the run config out, the step records back


def test_the_contract_imports_no_launcher_module():
    """Both sides import the contract; it imports the standard library and the pods' record writers only."""
    modules = {m for m in _imports(FINETUNING / "contract.py") if m.startswith("components.")}
    assert modules and all(m.startswith(POD + ".") for m in modules), modules
    assert not [m for m in modules if m.startswith(f"{POD}.progress_server")]  # not through the HTTP server
    for path in _sources(FINETUNING / "pod"):
        launcher = [
            m
            for m in _imports(path)
            if m.startswith("components.training.finetuning.") and not (m.startswith((POD, CONTRACT)))
        ]
        assert launcher == [], path


def test_publishing_does_not_import_the_cpu_trainer():
    modules = _imports(FINETUNING / "publish.py")
    assert not [m for m in modules if m.startswith("components.training.finetuning.local")]
    assert "components._common.files.replace_dir" in modules


def test_the_checker_sees_an_offending_import():
    """The import scan is not blind: a manifests module importing the client layer is caught (relative too)."""
    source = "def f():\n    from ..cluster import api\n    import components.training.finetuning.pod.metrics\n"
    modules = _imports_of(source, "components.training.finetuning.manifests")
    assert "components.training.finetuning.cluster.api" in modules
    assert "components.training.finetuning.pod.metrics" in modules


def test_no_parameter_bag_below_the_component_wrappers():
    files = _sources(ROOT / "components")
    offending = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in files
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "params.get(" in line or "**params" in line
    ]
    assert offending == []


def _kfp_names(tree: ast.AST) -> set[str]:
    """Names a module binds to kfp / kfp_server_api modules or objects (``from kfp.dsl import x``, ``import kfp``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] in _KFP)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _KFP and not node.level:
            names.update(a.asname or a.name for a in node.names)
    return names


_KFP = {"kfp", "kfp_server_api"}


def _root(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _kfp_assignments(path: Path, source: str | None = None) -> list[str]:
    tree = ast.parse(source if source is not None else path.read_text())
    names = _kfp_names(tree)
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("setattr", "delattr") and node.args:
            targets = [ast.Attribute(value=node.args[0], attr="?")]
        for target in targets:
            if isinstance(target, ast.Attribute) and _root(target) in names:
                found.append(f"{path}:{node.lineno}")
    return found


def _private_kfp_uses(path: Path, source: str | None = None) -> list[str]:
    """``__class__`` assignments and private kfp names (``kfp.x._y``, ``from kfp.x import _y``) in a source file."""
    tree = ast.parse(source if source is not None else path.read_text())
    names = _kfp_names(tree)
    found = []
    for node in ast.walk(tree):
        private = False
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _KFP:
            parts = (node.module or "").split(".") + [alias.name for alias in node.names]
            private = any(part.startswith("_") for part in parts)
        elif isinstance(node, ast.Import):
            private = any(
                part.startswith("_") for a in node.names if a.name.split(".")[0] in _KFP for part in a.name.split(".")
            )
        elif isinstance(node, ast.Attribute) and _root(node) in names:
            private = node.attr.startswith("_") and not node.attr.startswith("__")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            private = any(isinstance(t, ast.Attribute) and t.attr == "__class__" for t in targets)
        if private:
            found.append(f"{path}:{node.lineno}")
    return found


def test_nothing_patches_kfp_or_uses_its_private_api():
    files = _sources(ROOT / "components", ROOT / "pipelines", ROOT / "scripts", ROOT / "benchmarks")
    assert [hit for path in files for hit in _kfp_assignments(path)] == []
    assert [hit for path in files for hit in _private_kfp_uses(path)] == []
    # The scans see what they look for.
    probe = ROOT / "probe.py"
    patched = "from kfp.dsl import component_factory\ncomponent_factory.gzip = None\n"
    assert len(_kfp_assignments(probe, patched)) == 1
    for source in (
        "from kfp.dsl import component_factory\ncomponent_factory._generate_shared_extraction_helper(1)\n",
        "from kfp.local import executor_input_utils as e\nx = e._private\n",
        "from kfp.dsl._x import y\n",
        "class A: ...\nobj = object()\nobj.__class__ = A\n",
    ):
        assert len(_private_kfp_uses(probe, source)) == 1, source


_SNAPSHOT = """
import json, sys
def snapshot():
    from kfp.compiler import pipeline_spec_builder
    from kfp.dsl import component_factory, graph_component, pipeline_task
    from kfp.local import executor_input_utils, task_dispatcher
    from kfp_server_api import rest
    return {
        "validate_workspace": id(graph_component.GraphComponent._validate_workspace_requirements),
        "create_pipeline_spec": id(pipeline_spec_builder.create_pipeline_spec),
        "gzip": id(component_factory.gzip),
        "extraction_helper": id(component_factory._generate_shared_extraction_helper),
        "inspect": id(pipeline_task.inspect),
        "request": id(rest.RESTClientObject.request),
        "executor_input": id(executor_input_utils.construct_executor_input),
        "run_task": id(task_dispatcher.run_single_task_implementation),
    }
before = snapshot()
import components.data_processing.dataset_download, components.training.finetuning
import components.evaluation.lm_eval, components.deployment.kubeflow_model_registry
import pipelines.kfp_api.connection, pipelines.demo.story
after = snapshot()
print(json.dumps(sorted(k for k in before if before[k] != after[k])))
"""


def test_importing_the_components_patches_nothing_in_kfp():
    result = subprocess.run(
        [sys.executable, "-c", _SNAPSHOT], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


# ------------------------------------------------------------------------------------------------ import cycles


def _imported_from(node: ast.ImportFrom, package: str) -> str:
    """The module a ``from ... import`` statement imports from, relative imports resolved against ``package``."""
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def _import_graph(root: Path, folders: tuple[str, ...]) -> dict[str, set[str]]:
    """Which product modules each product module imports (anywhere in it, function bodies and TYPE_CHECKING too).

    Only explicit imports count: ``import a.b`` and ``from a.b import c`` point at ``a.b``, or at ``a.b.c`` alone where
    that is a module; the implicit import of a package's ``__init__`` (by its children, or by ``from a.b import c``
    of a submodule ``c``) does not.
    """
    files = {
        path: ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for folder in folders
        for path in (root / folder).rglob("*.py")
        if "tests" not in path.relative_to(root).parts and ".venv" not in path.parts
    }
    modules = set(files.values())
    graph: dict[str, set[str]] = {}
    for path, name in files.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _imported_from(node, package)
                names = {f"{base}.{alias.name}" for alias in node.names}
                imported.update(names & modules)
                if names - modules:  # a name defined in ``base`` itself
                    imported.add(base)
        graph[name] = (imported & modules) - {name}
    return graph


def _import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (each holds at least one cycle), sorted."""
    import networkx

    components = networkx.strongly_connected_components(networkx.DiGraph(graph))
    return sorted(sorted(component) for component in components if len(component) > 1)


def test_no_import_cycles_among_product_modules():
    graph = _import_graph(ROOT, ("components", "pipelines"))
    assert len(graph) > 100 and sum(map(len, graph.values())) > 100  # the scan sees the product and its imports
    assert _import_cycles(graph) == []


def test_the_cycle_detector_sees_lazy_and_relative_cycles(tmp_path):
    """Cycles closed by a function-level import or a ``TYPE_CHECKING`` import are caught (HEAD had three:
    ``chat_files``/``chat_format``, lm_eval's ``report``/``comparison``, ``kfp_api``'s ``connection``/``server``);
    a chain without a way back, and ``from a_package import a_submodule`` (no edge to its ``__init__``), are none."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "tests").mkdir()
    files = {
        "__init__.py": "",
        "chat_format.py": "def iter_chat_file():\n    from pkg.chat_files import iter_lines  # lazy\n",
        "chat_files.py": "from pkg.chat_format import ChatFormatError\n",
        "sub/__init__.py": "from .report import render\n",
        "sub/report.py": "from .comparison import compare\n",
        "sub/comparison.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub import report\n",
        "sub/leaf.py": "from pkg.sub import report\nimport pkg.chat_files\n",
        "tests/test_x.py": "import pkg.sub.leaf\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    graph = _import_graph(tmp_path, ("pkg",))
    assert "pkg.tests.test_x" not in graph
    assert _import_cycles(graph) == [
        ["pkg.chat_files", "pkg.chat_format"],
        ["pkg.sub.comparison", "pkg.sub.report"],
    ]
    (package / "chat_format.py").write_text("def iter_chat_file():\n    return 1\n")
    (package / "sub" / "comparison.py").write_text("def compare():\n    pass\n")
    assert _import_cycles(_import_graph(tmp_path, ("pkg",))) == []
