"""The RHOAI fine-tuning guide (../shared/seeds/rhoai-finetuning-pipelines-guide.md) works as written on this project.

Each test follows one instruction of the guide: its compile command and PVC constants, its parameter names, its
custom-pipeline snippet (read from the guide itself), its artifacts, its hardware table and its troubleshooting hooks.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipelines.compile import checked_in_path, compile_named, pipeline_function
from pipelines.training.finetuning import PIPELINES
from pipelines.training.finetuning.interface import REQUIRED, fed_by, pipeline_parameters

REPO_ROOT = Path(__file__).resolve().parents[1]
GUIDE = REPO_ROOT.parent / "shared" / "seeds" / "rhoai-finetuning-pipelines-guide.md"
#: Every parameter name the guide uses, with the component argument it means.
GUIDE_NAMES = {
    "phase_01_dataset_man_data_uri": "dataset_uri",
    "phase_02_train_man_train_batch": "training_effective_batch_size",
    "phase_02_train_man_train_tokens": "training_max_tokens_per_gpu",
    "phase_02_train_man_train_model": "training_base_model",
    "phase_02_train_man_train_epochs": "training_num_epochs",
    "phase_04_registry_man_address": "registry_address",
}


def _guide() -> str:
    if not GUIDE.is_file():
        pytest.skip(f"the guide is not beside the repository ({GUIDE})")
    return GUIDE.read_text()


def _run_script(script: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env = {k: v for k, v in env.items() if not k.startswith("KFP_FINETUNE_")}
    return subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_quick_start_compile_command_writes_pipeline_yaml_beside_the_module(tmp_path):
    """``PYTHONPATH=$(pwd) python pipelines/training/osft_minimal/pipeline.py`` → ``.../pipeline.yaml``."""
    assert "PYTHONPATH=$(pwd) python pipelines/training/osft_minimal/pipeline.py" in _guide()
    module = REPO_ROOT / "pipelines/training/osft_minimal/pipeline.py"
    copy = tmp_path / "osft_minimal" / "pipeline.py"  # a copy, so the checked-in YAML is not rewritten
    copy.parent.mkdir()
    shutil.copyfile(module, copy)
    run = _run_script(copy, REPO_ROOT)
    assert run.returncode == 0, run.stderr
    written = copy.with_name("pipeline.yaml")
    assert str(written) in run.stdout
    assert written.read_text() == checked_in_path("osft-minimal").read_text()

    # "Changing PVC Storage Class / Size": edit the constants at the top of pipeline.py and recompile.
    text = copy.read_text()
    banner = "# PVC Configuration (COMPILE-TIME settings)"
    assert text.index(banner) < text.index('PVC_STORAGE_CLASS = "nfs-csi"') < text.index("import")
    edited = text.replace('PVC_STORAGE_CLASS = "nfs-csi"', 'PVC_STORAGE_CLASS = "ocs-storagecluster-cephfs"')
    edited = edited.replace('PVC_SIZE = "50Gi"', 'PVC_SIZE = "100Gi"')
    edited = edited.replace('PIPELINE_NAME = "osft-minimal-pipeline"', 'PIPELINE_NAME = "my-osft"')
    copy.write_text(edited)
    run = _run_script(copy, REPO_ROOT)
    assert run.returncode == 0, run.stderr
    documents = list(yaml.safe_load_all(written.read_text()))
    workspace = documents[1]["platforms"]["kubernetes"]["pipelineConfig"]["workspace"]
    assert workspace["size"] == "100Gi"
    assert workspace["kubernetes"]["pvcSpecPatch"]["storageClassName"] == "ocs-storagecluster-cephfs"
    assert documents[0]["pipelineInfo"]["name"] == "my-osft"


def test_every_pipeline_folder_is_where_the_guide_says_with_its_constants():
    for name, module in PIPELINES.items():
        folder = REPO_ROOT / "pipelines/training" / name.replace("-", "_")
        assert module == f"pipelines.training.{folder.name}.pipeline"
        text = (folder / "pipeline.py").read_text()
        for constant in ("PVC_SIZE", "PVC_STORAGE_CLASS", "PVC_ACCESS_MODES", "PIPELINE_NAME"):
            assert re.search(rf"^{constant} = ", text, re.M), f"{folder}/pipeline.py lacks {constant}"
        readme = (folder / "README.md").read_text()
        assert "## Inputs 📥" in readme  # GitHub's anchor: #inputs- (the guide's links)


def test_constants_are_overridden_by_env_and_cli_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("KFP_FINETUNE_PVC_STORAGE_CLASS", "efs-sc")
    documents = list(yaml.safe_load_all(compile_named("sft", tmp_path / "env.yaml").read_text()))
    patch = documents[1]["platforms"]["kubernetes"]["pipelineConfig"]["workspace"]["kubernetes"]["pvcSpecPatch"]
    assert patch["storageClassName"] == "efs-sc"
    flags = {"pvc_storage_class": "azurefile-csi"}
    documents = list(yaml.safe_load_all(compile_named("sft", tmp_path / "flag.yaml", flags).read_text()))
    patch = documents[1]["platforms"]["kubernetes"]["pipelineConfig"]["workspace"]["kubernetes"]["pvcSpecPatch"]
    assert patch["storageClassName"] == "azurefile-csi"


def test_the_guides_parameter_names_exist_with_the_guides_meaning_everywhere():
    for guide_name in GUIDE_NAMES:
        assert guide_name in _guide()
    for algorithm in ("sft", "osft", "lora"):
        targets = fed_by(pipeline_function(algorithm))
        for guide_name, argument in GUIDE_NAMES.items():
            assert argument in {name for _, name in targets.get(guide_name, [])}, (algorithm, guide_name)
    # Minimal pipelines keep one required parameter: the data URI.
    for algorithm in ("sft", "osft", "lora"):
        minimal = pipeline_parameters(pipeline_function(f"{algorithm}-minimal"))
        assert [p.name for p in minimal if p.default is REQUIRED] == ["phase_01_dataset_man_data_uri"]


def test_the_guides_custom_pipeline_snippet_compiles_unchanged(tmp_path):
    guide = _guide()
    section = guide[guide.index("## Building Custom Pipelines") :]
    snippet = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert 'training_backend="mini-trainer"' in snippet and "pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER" in snippet
    script = tmp_path / "my_pipeline.py"
    output = tmp_path / "my_pipeline.yaml"
    script.write_text(
        snippet + f"\n\nfrom kfp import compiler\ncompiler.Compiler().compile(my_pipeline, {str(output)!r})\n"
    )
    run = _run_script(script, tmp_path)
    assert run.returncode == 0, run.stderr
    assert "declares no workspace" in run.stderr  # the default workspace it received is said, not silent
    documents = list(yaml.safe_load_all(output.read_text()))
    inputs = documents[0]["root"]["dag"]["tasks"]["train-model"]["inputs"]["parameters"]
    constants = {name: value["runtimeValue"]["constant"] for name, value in inputs.items()}
    assert constants["dataset_path"] == "path/to/dataset.jsonl"  # a string `dataset` is routed to the path input
    assert constants["training_algorithm"] == "OSFT" and constants["training_backend"] == "mini-trainer"
    assert constants["pvc_path"] == "{{$.workspace_path}}"
    assert documents[1]["platforms"]["kubernetes"]["pipelineConfig"]["workspace"]["size"] == "50Gi"


def test_a_string_dataset_is_resolved_against_the_workspace(tmp_path):
    from components.training.finetuning.config import TrainingConfigError
    from components.training.finetuning.staging import dataset_input

    (tmp_path / "path/to").mkdir(parents=True)
    (tmp_path / "path/to/dataset.jsonl").write_text("{}\n")
    assert dataset_input(None, "path/to/dataset.jsonl", str(tmp_path)).path == str(tmp_path / "path/to/dataset.jsonl")
    with pytest.raises(TrainingConfigError, match=r"dataset='missing.jsonl': .* does not exist \(relative paths"):
        dataset_input(None, "missing.jsonl", str(tmp_path))
    with pytest.raises(TrainingConfigError, match=r"dataset='s3://b/k': .*dataset_download"):
        dataset_input(None, "s3://b/k", str(tmp_path))
    with pytest.raises(TrainingConfigError, match=r"dataset: required"):
        dataset_input(None, " ", str(tmp_path))


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    out = tmp_path_factory.mktemp("guide")
    return {name: list(yaml.safe_load_all(compile_named(name, out / f"{name}.yaml").read_text())) for name in PIPELINES}


def _defaults(documents) -> dict:
    parameters = documents[0]["root"]["inputDefinitions"]["parameters"]
    return {name: spec.get("defaultValue") for name, spec in parameters.items()}


def _train_constants(documents) -> dict:
    """What the train task gets for each argument no pipeline parameter feeds: a constant, or the component default."""
    declared = documents[0]["components"]["comp-train-model"]["inputDefinitions"]["parameters"]
    values = {name: spec["defaultValue"] for name, spec in declared.items() if "defaultValue" in spec}
    inputs = documents[0]["root"]["dag"]["tasks"]["train-model"]["inputs"]["parameters"]
    values.update(
        {name: value["runtimeValue"]["constant"] for name, value in inputs.items() if "runtimeValue" in value}
    )
    for name, value in inputs.items():
        if "componentInputParameter" in value:
            values.pop(name, None)
    return values


def test_training_artifacts_carry_the_guides_names(compiled):
    for documents in compiled.values():
        outputs = documents[0]["components"]["comp-train-model"]["outputDefinitions"]["artifacts"]
        assert set(outputs) == {"output_model", "output_metrics", "output_loss_chart"}
        assert outputs["output_loss_chart"]["artifactType"]["schemaTitle"] == "system.HTML"  # Visualization tab


def test_default_hardware_follows_the_guides_table(compiled):
    table = {"sft": (4, 1, "4", "64Gi"), "osft": (1, 1, "8", "32Gi"), "lora": (1, 1, "8", "32Gi")}
    for name, documents in compiled.items():
        algorithm = name.split("-")[0]
        nodes, gpus, cpu, memory = table[algorithm]
        defaults, constants = _defaults(documents), _train_constants(documents)
        assert defaults["phase_02_train_man_train_workers"] == nodes, name
        assert defaults["phase_02_train_man_train_gpu"] == gpus, name
        # Expert pipelines expose CPU, memory and env as parameters; minimal ones pass constants (or defaults).
        cpu_value = defaults.get("phase_02_train_opt_cpu", constants.get("training_cpu_per_node"))
        memory_value = defaults.get("phase_02_train_opt_memory", constants.get("training_memory_per_node"))
        assert (cpu_value, memory_value) == (cpu, memory), name
        env = defaults.get("phase_02_train_opt_env_vars", constants.get("training_env_vars"))
        if algorithm == "sft":  # the guide: INSTRUCTLAB_NCCL_TIMEOUT_MS is set by default in SFT pipelines
            assert env == {"INSTRUCTLAB_NCCL_TIMEOUT_MS": "600000"}, name
        else:
            assert env == {}, name


def test_evaluation_requests_a_gpu_on_gpu_nodes(compiled, tmp_path):
    for name, documents in compiled.items():
        executor = documents[0]["deploymentSpec"]["executors"]["exec-lm-eval"]["container"]
        accelerator = executor["resources"]["accelerator"]
        assert (accelerator["resourceCount"], accelerator["resourceType"]) == ("1", "nvidia.com/gpu"), name
        platform = documents[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]["exec-lm-eval"]
        assert platform["nodeSelector"]["labels"] == {"nvidia.com/gpu.present": "true"}, name
    # --eval-gpus 0 (CPU-only clusters) turns both off.
    documents = list(yaml.safe_load_all(compile_named("sft", tmp_path / "cpu.yaml", {"eval_gpus": 0}).read_text()))
    executor = documents[0]["deploymentSpec"]["executors"]["exec-lm-eval"]["container"]
    assert "accelerator" not in executor.get("resources", {})
    assert "nodeSelector" not in documents[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]["exec-lm-eval"]


def test_eval_settings_are_checked_with_the_setting_named():
    from pipelines.training.finetuning.settings import CompileSettings

    with pytest.raises(ValueError, match="eval_node_selector must be 'key=value'"):
        CompileSettings(eval_node_selector="gpu")
    with pytest.raises(ValueError, match="KFP_FINETUNE_EVAL_GPUS='one': eval_gpus must be an integer"):
        CompileSettings.from_env({"KFP_FINETUNE_EVAL_GPUS": "one"})
