"""The built wheel, installed as a user installs it: a package of its own (``kfp_finetune``), beside a user's project
with its own ``components`` and ``pipelines`` packages (fixtures: ``tests/harness/installed_wheel.py``).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from benchmarks import component_delivery
from tests.harness.compiled import pipeline_documents
from tests.harness.installed_wheel import run_checked as _run

ROOT = Path(__file__).resolve().parents[1]
#: Each component's package as the wheel installs it: the clone's (``benchmarks/component_delivery.py``'s table) under
#: ``kfp_finetune``.
COMPONENTS = {name: f"kfp_finetune.{module}" for name, module in component_delivery.COMPONENTS.items()}
#: The clone's top-level packages, which the wheel must not install.
CLONE_PACKAGES = ("components", "pipelines")
#: A module path of the clone's layout, as an import or a string (``"components.training.x"``).
CLONE_MODULE_PATH = re.compile(r"^(components|pipelines)(\.[A-Za-z_]\w*)+$")


def _load_setup_py():
    spec = importlib.util.spec_from_file_location("kfp_finetune_setup", ROOT / "setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # setup() itself runs only as __main__
    return module


def test_rewrite_moves_imports_and_module_paths_only():
    setup = _load_setup_py()
    source = (
        "from kfp import components\n"
        "from kfp import compiler, components as c\n"
        "from components.training.finetuning import train_model\n"
        "import pipelines.cli as cli; from pipelines import demo\n"
        'MODULES = ("components._common.s3", spec.get("components"), f"{x}.components.y", "pipelines. The end")\n'
        "def f():\n"
        "    from components._common import files  # components.x: a comment stays\n"
    )
    assert setup.rewrite_module_references(source) == (
        "from kfp import components\n"
        "from kfp import compiler, components as c\n"
        "from kfp_finetune.components.training.finetuning import train_model\n"
        "import kfp_finetune.pipelines.cli as cli; from kfp_finetune.pipelines import demo\n"
        'MODULES = ("kfp_finetune.components._common.s3", spec.get("components"), f"{x}.components.y", '
        '"pipelines. The end")\n'
        "def f():\n"
        "    from kfp_finetune.components._common import files  # components.x: a comment stays\n"
    )
    with pytest.raises(setup.UnsupportedImportError, match=r"<source>:1: 'import components\.\.\.' without 'as'"):
        setup.rewrite_module_references("import components.training\n")


def test_wheel_has_one_package_of_its_own_and_nothing_of_the_clone_layout(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        sources = {name: archive.read(name).decode() for name in names if name.endswith(".py")}
        entry_points = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/entry_points.txt"))
        metadata = next(archive.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert {name.split("/")[0] for name in names} == {"kfp_finetune", wheel.name.split("-py3")[0] + ".dist-info"}
    assert not [name for name in names if "/tests/" in name or name.endswith("pipeline.yaml")]
    left = []
    for name, text in sources.items():
        for node in ast.walk(ast.parse(text, name)):
            if isinstance(node, ast.Import | ast.ImportFrom):  # `from components import x`, `import pipelines.cli`
                modules = [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
                modules += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
                left += [f"{name}:{node.lineno}: import {m}" for m in modules if m.split(".")[0] in CLONE_PACKAGES]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and CLONE_MODULE_PATH.match(node.value):
                left += [f"{name}:{node.lineno}: {node.value!r}"]  # a module path in a string: staged, imported
    assert not left, "module paths of the clone's layout left in the wheel:\n" + "\n".join(left)
    assert re.search(r"^kfp-finetune = kfp_finetune:main$", entry_points, re.M)
    # Every file the clone's packages hold besides the code (metadata, READMEs, RBAC, the demo's data) is shipped.
    data = {
        f"kfp_finetune/{path.relative_to(ROOT).as_posix()}"
        for package in ("components", "pipelines")
        for path in (ROOT / package).rglob("*")
        if path.is_file()
        and path.suffix not in (".py", ".pyc")
        and path.name != "pipeline.yaml"
        and "tests" not in path.relative_to(ROOT).parts
    }
    assert data and data <= set(names), f"not in the wheel: {sorted(data - set(names))}"
    # The version is the step image's tag (one source of truth: components/_common/images.py).
    from components._common.images import PROJECT_VERSION, STEP_IMAGE

    assert re.search(rf"^Version: {re.escape(PROJECT_VERSION)}$", metadata, re.M)
    assert STEP_IMAGE.endswith(f":{PROJECT_VERSION}") and wheel.name.startswith(f"kfp_finetune-{PROJECT_VERSION}-")
    requires = re.findall(r"^Requires-Dist: (\S+?)(?:[<>=; ]|$)", metadata, re.M)
    core = [
        name
        for name, line in zip(requires, re.findall(r"^Requires-Dist: .*$", metadata, re.M))
        if "extra ==" not in line
    ]
    assert sorted(core) == ["croniter", "kfp", "kfp-kubernetes", "msgspec", "pyyaml", "tenacity"]


def test_the_venv_sees_the_wheel_not_the_clone(venv, user_project):
    probe = (
        "import importlib.util, json, sys\n"
        "import kfp_finetune, components, pipelines\n"
        "print(json.dumps({'kfp_finetune': kfp_finetune.__file__, 'components': components.OWNER,"
        " 'pipelines': pipelines.OWNER, 'finders': [type(f).__name__ for f in sys.meta_path],"
        " 'clone': [p for p in sys.path if p == %r]}))\n" % str(ROOT)
    )
    seen = json.loads(_run([str(venv / "bin" / "python"), "-c", probe], cwd=user_project).stdout)
    assert seen["kfp_finetune"].startswith(str(venv)) and not seen["clone"]
    assert seen["components"] == "the user's components" and seen["pipelines"] == "the user's pipelines"
    assert not [name for name in seen["finders"] if "Editable" in name or "editable" in name], seen["finders"]


def test_a_user_project_with_its_own_components_imports_every_component_and_compiles_every_pipeline(
    venv, user_project, tmp_path
):
    probe = (
        "import importlib, json, sys\n"
        f"components = {COMPONENTS!r}\n"
        "kinds = {name: type(getattr(importlib.import_module(module), name)).__name__"
        " for name, module in components.items()}\n"
        "import components as mine, pipelines as theirs\n"
        "clone = sorted(m for m in sys.modules if m.split('.')[0] in ('components', 'pipelines') and '.' in m)\n"
        "print(json.dumps({'kinds': kinds, 'mine': [mine.OWNER, theirs.OWNER], 'clone_modules': clone}))\n"
    )
    seen = json.loads(_run([str(venv / "bin" / "python"), "-c", probe], cwd=user_project).stdout)
    assert seen["kinds"] == dict.fromkeys(COMPONENTS, "RuntimeComponent")
    assert seen["mine"] == ["the user's components", "the user's pipelines"] and seen["clone_modules"] == []
    # The console script of the wheel compiles every pipeline; each step's command imports kfp_finetune's modules.
    _run([str(venv / "bin" / "kfp-finetune"), "compile", "--all", "-o", str(tmp_path)], cwd=user_project)
    compiled = {path.stem: path.read_text() for path in tmp_path.glob("*.yaml")}
    assert sorted(compiled) == sorted(
        ["lora", "lora-minimal", "osft", "osft-minimal", "sft", "sft-minimal", "grpo", "lora-grpo"]
    )
    for name, text in compiled.items():
        assert "from kfp_finetune.components." in text, name
        assert not re.search(r"(?<![\w.])(from|import) (components|pipelines)\.", text), name
    # Nothing embedded: every step runs on the project's images, which carry the wheel's layout too (Containerfile).
    from components._common.images import STEP_IMAGE, STEP_IMAGE_CUDA

    executors = pipeline_documents(compiled["sft-minimal"])[0]["deploymentSpec"]["executors"]
    assert {e["container"]["image"] for e in executors.values()} == {STEP_IMAGE, STEP_IMAGE_CUDA}
    for executor in executors.values():
        command = "\n".join(executor["container"]["command"])
        assert "__KFP_EMBEDDED_ARCHIVE_B64" not in command and "pip install" not in command
        assert "from kfp_finetune.components." in command
    # Without -o: into the current directory, never into the installed package (as a clone does, beside pipeline.py).
    _run([str(venv / "bin" / "kfp-finetune"), "compile", "sft-minimal"], cwd=user_project)
    written = (user_project / "sft-minimal.yaml").read_text()
    assert "from kfp_finetune.components." in written and "name: sft-minimal-pipeline" in written
    assert not list(venv.rglob("pipeline.yaml"))


def test_the_training_pods_code_stages_from_the_wheel_and_imports_with_the_standard_library_only(venv, tmp_path):
    stage = (
        "import sys\nfrom pathlib import Path\n"
        "from kfp_finetune.components.training.finetuning import contract, transformers_backend\n"
        "from kfp_finetune.components.training.finetuning.staging import stage_code_tree\n"
        "stage_code_tree(Path(sys.argv[1]) / 'code', contract.POD_MODULES)\n"
        "stage_code_tree(Path(sys.argv[1]) / 'transformers', transformers_backend.STAGED_MODULES)\n"
        "print(' '.join(contract.POD_MODULES))\n"
    )
    modules = _run([str(venv / "bin" / "python"), "-c", stage, str(tmp_path)], cwd=tmp_path).stdout.split()
    assert modules and all(module.startswith("kfp_finetune.components.") for module in modules)
    assert (
        tmp_path / "transformers" / "kfp_finetune" / "components" / "training" / "finetuning" / "hf_trainer"
    ).is_dir()
    # As in a training pod: no site-packages at all, only the staged tree.
    check = f"import sys; sys.path.insert(0, {str(tmp_path / 'code')!r}); import " + ", ".join(modules)
    _run([sys._base_executable, "-I", "-S", "-c", check], cwd=tmp_path)


def test_kfp_local_still_rewrites_python3_in_a_steps_arguments():
    """kubeflow/pipelines#14459 (open): fails once kfp leaves them alone (drop demo/run_demo.py's copy)."""
    from kfp.local.subprocess_task_handler import replace_python_executable

    command = ["sh", "-c", "python3 -m kfp.dsl.executor_main", "--executor_input", '{"uri": "/lib/python3.11/x"}']
    replaced = replace_python_executable(command, "/venv/bin/python")
    assert replaced[-1] == '{"uri": "/lib//venv/bin/python.11/x"}'


def test_from_a_clone_the_console_script_runs_the_clones_cli(tmp_path):
    """``kfp-finetune`` is ``kfp_finetune:main`` in both layouts; in a clone it runs ``pipelines.cli``."""
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"] == {
        "kfp-finetune": "kfp_finetune:main"
    }
    probe = (
        "import sys, kfp_finetune\n"
        "try:\n    kfp_finetune.main(['compile', '--help'])\nexcept SystemExit as stop:\n    assert stop.code == 0\n"
        "print(sorted(sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0 and "usage: kfp-finetune compile" in result.stdout, result.stderr[-2000:]
    assert "'pipelines.cli'" in result.stdout and "kfp_finetune.pipelines" not in result.stdout


def test_the_demo_hands_kfp_local_only_paths_it_leaves_alone(tmp_path):
    from pipelines.demo.run_demo import check_step_arguments, steps_data_dir

    installed = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "data"
    (installed / "general_sentences").mkdir(parents=True)
    (installed / "demo_chat.jsonl").write_text('{"messages": []}\n')
    (installed / "general_sentences" / "general_sentences.yaml").write_text("task: general_sentences\n")
    copy = steps_data_dir(tmp_path / "out", installed)
    assert copy == tmp_path / "out" / "data" and "python3" not in str(copy)
    assert (copy / "general_sentences" / "general_sentences.yaml").read_text() == "task: general_sentences\n"
    assert steps_data_dir(tmp_path / "out", tmp_path / "clone" / "data") == tmp_path / "clone" / "data"
    check_step_arguments({"phase_01_dataset_man_data_uri": str(copy / "demo_chat.jsonl"), "n": 3})
    with pytest.raises(ValueError, match=r"^eval_tasks='/home/u/python3-work/t': kfp.local rewrites 'python3' .*14459"):
        check_step_arguments({"n": 3, "eval_tasks": ["hellaswag", "/home/u/python3-work/t"]})


@pytest.mark.slow
def test_kfp_finetune_demo_runs_from_the_installed_wheel(wheel_demo, user_project):
    """``kfp-finetune demo`` from the wheel: kfp.local runs the components from site-packages (lib/python3.11/...)."""
    result = wheel_demo.wait(timeout=300)
    out = result.stdout
    assert result.returncode == 0, f"{result.args} failed:\n{out[-3000:]}\n{result.stderr[-3000:]}"
    assert "[5/5] model-registry done" in out and "held-out loss" in out, out
    assert f"data: {user_project}/kfp-finetune-demo/data/demo_chat.jsonl" in out
    run_dirs = list((user_project / "kfp-finetune-demo" / "outputs").iterdir())
    assert len(run_dirs) == 1 and (run_dirs[0] / "train-model" / "output_model").is_dir()


def test_a_release_tag_must_be_the_version_the_images_and_the_wheel_are_published_under():
    """The release: tag v<PROJECT_VERSION>, then both step images (checked, pushed, inspected), then the wheel."""
    import yaml

    from components._common.images import PROJECT_VERSION, STEP_IMAGE, STEP_IMAGE_CUDA

    script = [str(ROOT / "scripts" / "build_step_image.sh"), "--check-tag"]
    assert _run(["bash", *script, f"v{PROJECT_VERSION}"], cwd=ROOT).stdout.strip() == STEP_IMAGE
    wrong = subprocess.run(["bash", *script, f"v{PROJECT_VERSION}.1"], capture_output=True, text=True, timeout=30)
    assert wrong.returncode == 1 and f"release tag 'v{PROJECT_VERSION}.1' is not v{PROJECT_VERSION}" in wrong.stderr
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    assert workflow[True]["push"]["tags"] == ["v*"]  # YAML 1.1 reads the key `on` as True
    images, wheel = workflow["jobs"]["step-images"], workflow["jobs"]["wheel"]
    runs = [step.get("run", "") for step in images["steps"]]
    # In this order: the tag is the version, not published yet, build both, check both, push, inspect what was pushed.
    needles = (
        '--check-tag "$GITHUB_REF_NAME"',
        "STEP_IMAGE_CUDA",
        "skopeo inspect",
        "\nbash scripts/build_step_image.sh\n",
        '--build-arg "TORCH_INDEX=$CUDA_TORCH_INDEX" -t "$IMAGE_CUDA" -f Containerfile',
        "torch.version.cuda",
        'podman push --digestfile pushed-cuda.digest "$IMAGE_CUDA"',
        '["Digest"]',
    )
    order = [next(i for i, run in enumerate(runs) if needle in f"\n{run}\n") for needle in needles]
    assert order == sorted(order) and len(set(order[2:])) == len(order[2:]), runs
    assert STEP_IMAGE_CUDA == f"{STEP_IMAGE}-cuda"
    assert {"QUAY_ROBOT_USERNAME", "QUAY_ROBOT_TOKEN"} <= {
        name for step in images["steps"] for name in (step.get("env") or {})
    }
    # The wheel only after the images; OIDC for PyPI in that job alone; the same tag check first, then the build.
    assert wheel["needs"] == "step-images" and wheel["permissions"]["id-token"] == "write"
    assert "id-token" not in workflow["permissions"] and wheel["environment"] == "pypi"
    steps = [step.get("run", "") + step.get("uses", "") for step in wheel["steps"]]
    needles = ('--check-tag "$GITHUB_REF_NAME"', "pypi.org/pypi/kfp-finetune", "python -m build", "py3-none-any.whl")
    order = [next(i for i, step in enumerate(steps) if needle in step) for needle in needles]
    assert order == sorted(order) and steps[-1] == "pypa/gh-action-pypi-publish@release/v1", steps
