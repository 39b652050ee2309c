"""How code reaches each pod: KFP's embedding of the real source (three steps), the step image (train_model)."""

import tarfile
from pathlib import Path

import yaml
from kfp import compiler, dsl

from components._common import runtime
from components._common.runtime import COMPONENTS_ROOT, runtime_component, stage_runtime_bundle
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


def test_compiled_component_embeds_the_source_unchanged(tmp_path):
    path = tmp_path / "component.yaml"
    compiler.Compiler().compile(where_is_runtime_code, str(path))
    spec = yaml.safe_load(path.read_text())
    with _embedded_archive(spec) as tar:
        names = tar.getnames()
        runtime_source = tar.extractfile("./components/_common/runtime.py").read().decode()
    assert "./components/_common/runtime.py" in names
    assert runtime_source == Path(runtime.__file__).read_text()  # no rewriting: the file as it is in the repository


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
        "exec-lm-eval": ("evaluation.lm_eval.custom_task", {"chat_format", "masking", "arguments"}),
        # run.py (the orchestrator and the wrapper's request builder) imports serving.py and through it kube_auth.py
        "exec-model-registry": ("deployment.kubeflow_model_registry.run", {"masking", "kube_auth", "arguments"}),
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
    # train_model runs on the versioned step image (its code does not fit an argument): nothing embedded or installed
    from components._common.images import STEP_IMAGE

    launcher = pipeline["deploymentSpec"]["executors"]["exec-train-model"]["container"]
    assert launcher["image"] == STEP_IMAGE
    assert not any("__KFP_EMBEDDED_ARCHIVE_B64" in part or "pip install" in part for part in launcher["command"])


def test_only_the_imported_common_modules_are_staged(tmp_path):
    from components._common.runtime import needed_common_modules

    registry = COMPONENTS_ROOT / "deployment" / "kubeflow_model_registry"
    assert "chat_format" not in needed_common_modules([registry]) and "masking" in needed_common_modules([registry])
    bundle = stage_runtime_bundle([registry], tmp_path)
    assert not (bundle / "components/_common/chat_format.py").exists()
    assert (bundle / "components/_common/masking.py").is_file()


def test_nested_packages_of_a_component_are_staged_and_import_from_the_bundle(tmp_path):
    """A component's subpackages (train_model's cluster/, manifests/, pod/, local/, oci/) are staged whole and import
    from the staged tree (train_model itself is not embedded: the same tree is what its step image carries)."""
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
