"""The runtime-delivery mechanism: project code embedded in the compiled component reaches the task and imports."""

import ast
import io
import tarfile
import tokenize
from pathlib import Path

import yaml
from kfp import compiler, dsl

from components._common import runtime
from components._common.runtime import (
    COMPONENTS_ROOT,
    _function_locals,
    runtime_component,
    slim_source,
    stage_runtime_bundle,
)
from tests.harness.compiled import open_embedded_archive

REPO_ROOT = Path(__file__).resolve().parents[1]


@runtime_component(str(COMPONENTS_ROOT / "_common" / "component.py"))
def where_is_runtime_code(marker: str) -> str:
    """Imports the embedded project module and reports where it was loaded from."""
    import components._common.runtime as embedded

    return f"{marker}|{embedded.__file__}|{embedded.DEFAULT_BASE_IMAGE}"


def test_bundle_holds_pure_modules_only(tmp_path):
    bundle = stage_runtime_bundle([COMPONENTS_ROOT / "_common"], tmp_path)
    files = sorted(str(p.relative_to(bundle)) for p in bundle.rglob("*") if p.is_file())
    assert "components/__init__.py" in files
    assert "components/_common/runtime.py" in files
    assert not [f for f in files if "tests" in f.split("/") or f.endswith("component.py") or "__pycache__" in f]
    assert (bundle / "components/_common/__init__.py").read_text() == '"""Runtime bundle package."""\n'


def test_bundle_rejects_code_outside_components(tmp_path):
    import pytest

    with pytest.raises(ValueError, match="must live under"):
        stage_runtime_bundle([REPO_ROOT / "pipelines"], tmp_path / "bundle")


def _embedded_archive(component_yaml: dict) -> tarfile.TarFile:
    executor = next(iter(component_yaml["deploymentSpec"]["executors"].values()))
    source = executor["container"]["command"][-1]
    encoded = source.split("__KFP_EMBEDDED_ARCHIVE_B64 = '", 1)[1].split("'", 1)[0]
    assert "mode='r:gz'" in source  # KFP's own packing and extraction code
    return open_embedded_archive(encoded)


def test_compiled_component_embeds_the_slimmed_bundle(tmp_path):
    path = tmp_path / "component.yaml"
    compiler.Compiler().compile(where_is_runtime_code, str(path))
    spec = yaml.safe_load(path.read_text())
    with _embedded_archive(spec) as tar:
        names = tar.getnames()
        runtime_source = tar.extractfile("./components/_common/runtime.py").read().decode()
    assert "./components/_common/runtime.py" in names
    assert runtime_source == slim_source(Path(runtime.__file__).read_text())


def _definitions(source: str) -> list[tuple[str, int, str]]:
    """(name, line, docstring summary) of every class and function."""
    tree = ast.parse(source)
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [
        (node.name, node.lineno, (ast.get_docstring(node) or "").split("\n")[0])
        for node in ast.walk(tree)
        if isinstance(node, kinds)
    ]


def _as_assign(node):
    if isinstance(node, ast.AnnAssign) and node.value is not None and node.simple:
        return ast.Assign(targets=[node.target], value=node.value)
    return node


def _code_nodes(source: str) -> list[str]:
    """The tree's node types without docstrings, other constants and function parameter and return annotations."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, (str, type(...))):
                node.body = body[1:] or [ast.Pass()]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in [node, *_function_locals(node)]:  # x: T = v -> x = v
                for field, value in ast.iter_fields(inner):
                    if isinstance(value, list):
                        setattr(inner, field, [_as_assign(item) for item in value])
            node.returns = None
            params = node.args
            for arg in [*params.posonlyargs, *params.args, *params.kwonlyargs, params.vararg, params.kwarg]:
                if arg is not None:
                    arg.annotation = None
    return [type(n).__name__ for n in ast.walk(tree) if not isinstance(n, (ast.Constant, ast.Pass))]


def test_slim_source_drops_function_annotations_only():
    source = (
        "from dataclasses import dataclass\n"
        "@dataclass\n"
        "class Point:\n"
        "    x: int = 1\n"
        "def scale(point: Point, factor: float = 2.0, *rest: int, **named: str) -> dict[str, float]:\n"
        "    total: float = point.x * factor\n"
        "    return {'total': total}\n"
        "def local_dataclass():\n"
        "    @dataclass\n"
        "    class Local:\n"
        "        y: int = 2\n"
        "    value: int = Local().y\n"
        "    return value\n"
        "def kept(\n"
        "    value: dict[\n"
        "        str, int\n"
        "    ],\n"
        ") -> int:\n"
        "    return len(value)\n"
    )
    slimmed = slim_source(source)
    assert slimmed.count("\n") == source.count("\n")
    assert "def scale(point, factor = 2.0, *rest, **named):" in slimmed
    assert "    x: int = 1" in slimmed and "    total = point.x * factor" in slimmed  # class annotations stay
    assert "    value: dict[" in slimmed and ") -> int:" not in slimmed  # a multi-line annotation stays
    namespace: dict = {}
    exec(compile(slimmed, "m", "exec"), namespace)
    assert namespace["scale"](namespace["Point"](3)) == {"total": 6.0} and namespace["scale"].__annotations__ == {}
    assert namespace["kept"]({"a": 1}) == 1
    assert "        y: int = 2" in slimmed and "    value = Local().y" in slimmed  # a local dataclass keeps its fields
    assert namespace["local_dataclass"]() == 2


def test_slim_source_keeps_code_lines_and_module_summaries_but_drops_the_rest():
    """Every shipped module: same line count, same definitions on the same lines, no comments, inner docs gone."""
    modules = [p for p in COMPONENTS_ROOT.rglob("*.py") if "tests" not in p.parts]
    assert len(modules) > 20
    saved = 0
    for module in modules:
        source = module.read_text()
        slimmed = slim_source(source)
        assert slimmed.count("\n") == source.count("\n"), module
        assert [d[:2] for d in _definitions(slimmed)] == [d[:2] for d in _definitions(source)], module
        assert not [d for d in _definitions(slimmed) if d[2]], module
        summary = (ast.get_docstring(ast.parse(source)) or "").split("\n")[0] if "__doc__" in source else ""
        assert (ast.get_docstring(ast.parse(slimmed)) or "") == summary, module
        # The same code: equal trees once docstrings (constants) and signature annotations are set aside.
        assert _code_nodes(source) == _code_nodes(slimmed), module
        assert not [t for t in tokenize.generate_tokens(io.StringIO(slimmed).readline) if t.type == tokenize.COMMENT]
        saved += len(source) - len(slimmed)
    assert saved > 80_000


def test_slim_source_behaves_the_same_and_keeps_line_numbers():
    source = (
        '"""Module doc.\n\nMore text."""\n'
        "import inspect  # a comment\n"
        "def f(x):\n"
        '    """Doubles x.\n\n    Args:\n        x: a number.\n    """\n'
        "    text = '# not a comment'\n"
        "    return 2 * x, text, inspect.currentframe().f_lineno, __doc__\n"
        "class Empty:\n"
        '    """Only a docstring: it becomes `...`."""\n'
    )
    slimmed = slim_source(source)
    original: dict = {}
    exec(compile(source, "m", "exec"), original)
    namespace: dict = {}
    exec(compile(slimmed, "m", "exec"), namespace)
    assert namespace["f"](3) == (6, "# not a comment", 12, "Module doc.")
    assert original["f"](3)[:3] == (6, "# not a comment", 12)
    assert namespace["__doc__"] == "Module doc." and namespace["f"].__doc__ is None and original["f"].__doc__
    assert namespace["Empty"].__doc__ is None and "    ...\n" in slimmed
    # A module that does not read its __doc__ loses the summary too.
    assert slim_source('"""Summary."""\nX = 1\n') == "\nX = 1\n"
    assert "# a comment" not in slimmed
    assert slim_source("def broken(:\n") == "def broken(:\n"


def test_embedded_code_runs_through_kfp_local(kfp_local):
    task = where_is_runtime_code(marker="hello")
    marker, loaded_from, image = task.output.split("|")
    assert marker == "hello"
    assert image == runtime.DEFAULT_BASE_IMAGE
    # Imported from the extracted archive, not from the checkout.
    assert not Path(loaded_from).resolve().is_relative_to(REPO_ROOT)
    assert loaded_from.endswith("components/_common/runtime.py")


def test_pipeline_of_embedded_components_runs_locally(kfp_local):
    @dsl.pipeline
    def two_steps() -> str:
        first = where_is_runtime_code(marker="a")
        return where_is_runtime_code(marker=first.output).output

    result = two_steps()
    assert result.output.startswith("a|")


def test_parameter_docs_become_the_docstring_and_the_dashboard_descriptions(tmp_path):
    import pytest

    from components._common.runtime import with_parameter_docs

    def step(name: str, count: int = 1) -> str:
        """Does a step."""
        return name * count

    documented = runtime_component(
        str(COMPONENTS_ROOT / "_common" / "component.py"),
        parameter_docs={"name": "Who to greet.", "count": "How many   times."},
    )(step)
    assert (
        documented.python_func.__doc__ == "Does a step.\n\nArgs:\n    name: Who to greet.\n    count: How many times.\n"
    )
    path = tmp_path / "c.yaml"
    compiler.Compiler().compile(documented, str(path))
    parameters = yaml.safe_load(path.read_text())["root"]["inputDefinitions"]["parameters"]
    assert parameters["count"]["description"] == "How many times."
    with pytest.raises(ValueError, match=r"unknown parameters \['typo'\]"):
        with_parameter_docs(step, {"typo": "x"})


def test_compiled_pipelines_ship_the_shared_modules_each_step_imports(tmp_path, shipped_pipeline_yamls):
    """Each step's pod gets exactly the ``_common`` modules its code imports, and its modules import from there."""
    import subprocess
    import sys

    pipeline = next(iter(yaml.safe_load_all(shipped_pipeline_yamls["sft"].read_text())))
    steps = {
        "exec-dataset-download": (
            "data_processing.dataset_download.run",
            {"chat_format", "masking", "termination"},
        ),
        "exec-train-model": ("training.finetuning.run", {"chat_format", "masking"}),
        "exec-lm-eval": ("evaluation.lm_eval.custom_task", {"chat_format", "masking"}),
        "exec-model-registry": ("deployment.kubeflow_model_registry.run", {"masking"}),
    }
    for executor, (module, shared) in steps.items():
        executors = {executor: pipeline["deploymentSpec"]["executors"][executor]}
        root = tmp_path / executor
        with _embedded_archive({"deploymentSpec": {"executors": executors}}) as tar:
            tar.extractall(root, filter="data")
        shipped = {path.stem for path in (root / "components" / "_common").glob("*.py")} - {"__init__"}
        assert shared <= shipped and "runtime" not in shipped, (executor, shipped)
        probe = f"import sys; sys.path.insert(0, {str(root)!r}); import components.{module} as m; print(m.__file__)"
        done = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip().startswith(str(root)), done.stdout


def test_only_the_imported_common_modules_are_staged(tmp_path):
    from components._common.runtime import needed_common_modules

    registry = COMPONENTS_ROOT / "deployment" / "kubeflow_model_registry"
    assert "chat_format" not in needed_common_modules([registry]) and "masking" in needed_common_modules([registry])
    bundle = stage_runtime_bundle([registry], tmp_path)
    assert not (bundle / "components/_common/chat_format.py").exists()
    assert (bundle / "components/_common/masking.py").is_file()


def test_nested_packages_of_a_component_are_shipped_and_import_in_the_pod(tmp_path):
    """train_model's subpackages (cluster/, manifests/, pod/, local/, oci/) reach the pod and import from the bundle."""
    import subprocess
    import sys

    finetuning = COMPONENTS_ROOT / "training" / "finetuning"
    bundle = stage_runtime_bundle([finetuning], tmp_path)
    shipped = bundle / "components" / "training" / "finetuning"
    expected = {p.relative_to(finetuning) for p in finetuning.rglob("*.py") if "tests" not in p.parts}
    expected -= {Path("component.py"), Path("parameter_docs.py")}
    assert {p.relative_to(shipped) for p in shipped.rglob("*.py")} == expected
    for package in ("cluster", "manifests", "pod", "local", "oci"):
        assert (shipped / package / "__init__.py").read_text() == '"""Runtime bundle package."""\n'
    modules = ["run", "launch", "cluster.runner", "manifests.trainjob", "manifests.pytorchjob", "pod.entrypoint"]
    probe = (
        f"import sys; sys.path.insert(0, {str(bundle)!r}); import importlib; "
        f"print([importlib.import_module('components.training.finetuning.' + m).__file__ for m in {modules!r}])"
    )
    done = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count(str(bundle)) == len(modules), done.stdout
