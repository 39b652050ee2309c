"""The RHOAI fine-tuning guide works as written: each test follows one instruction with the guide's facts.

The facts are data in ``tests/specs/guide/rhoai_guide_facts.yaml``.
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

from pipelines.compile import compile_named, pipeline_function
from pipelines.training.finetuning import PIPELINES
from pipelines.training.finetuning.interface import REQUIRED, fed_by, pipeline_parameters
from tests.harness.compiled import GRPO_PIPELINES, pipeline_documents

REPO_ROOT = Path(__file__).resolve().parents[1]
FACTS = yaml.safe_load((REPO_ROOT / "tests/specs/guide/rhoai_guide_facts.yaml").read_text())
#: Every parameter name the guide uses, with the component argument it means.
GUIDE_NAMES = FACTS["parameter_names"]


def _run_script(script: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env = {k: v for k, v in env.items() if not k.startswith("KFP_FINETUNE_")}
    return subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_quick_start_compile_command_writes_pipeline_yaml_beside_the_module(tmp_path):
    """``PYTHONPATH=$(pwd) python pipelines/training/osft_minimal/pipeline.py`` → ``.../pipeline.yaml`` (the unmodified
    module's compile: ``tests/test_guide_environment.py``), then the guide's edits of the constants, recompiled."""
    quick_start = FACTS["quick_start"]
    script = quick_start["compile_command"].removeprefix("PYTHONPATH=$(pwd) python ")
    assert quick_start["compiled_path"] == str(Path(script).with_name("pipeline.yaml"))
    copy = tmp_path / "osft_minimal" / "pipeline.py"  # a copy, so the clone's own pipeline.yaml is not rewritten
    copy.parent.mkdir()
    shutil.copyfile(REPO_ROOT / script, copy)
    written = copy.with_name("pipeline.yaml")

    # "Changing PVC Storage Class / Size": edit the constants at the top of pipeline.py and recompile.
    text = copy.read_text()
    pvc = FACTS["pvc"]
    lines = [f"{name} = {value}" for name, value in pvc["constants"].items()]
    assert text.index(pvc["banner"]) < min(text.index(line) for line in lines)
    assert max(text.index(line) for line in lines) < text.index("import")
    edited = text.replace(lines[1], f'PVC_STORAGE_CLASS = "{pvc["storage_class_examples"][0]}"')
    edited = edited.replace(lines[0], f"PVC_SIZE = {pvc['edited_size']}")
    edited = edited.replace(lines[3], 'PIPELINE_NAME = "my-osft"')
    copy.write_text(edited)
    run = _run_script(copy, REPO_ROOT)
    assert run.returncode == 0, run.stderr
    assert str(written) in run.stdout
    documents = pipeline_documents(written)
    workspace = documents[1]["platforms"]["kubernetes"]["pipelineConfig"]["workspace"]
    assert workspace["size"] == "100Gi"
    assert workspace["kubernetes"]["pvcSpecPatch"]["storageClassName"] == "ocs-storagecluster-cephfs"
    assert documents[0]["pipelineInfo"]["name"] == "my-osft"


def test_every_pipeline_folder_is_where_the_guide_says_with_its_constants():
    assert set(FACTS["pipelines"]) <= set(PIPELINES)
    for name, path in FACTS["pipelines"].items():
        assert PIPELINES[name] == path.replace("/", ".") + ".pipeline"
    for name, module in PIPELINES.items():
        folder = REPO_ROOT / "pipelines/training" / name.replace("-", "_")
        assert module == f"pipelines.training.{folder.name}.pipeline"
        text = (folder / "pipeline.py").read_text()
        for constant in FACTS["pvc"]["constants"]:
            assert re.search(rf"^{constant} = ", text, re.M), f"{folder}/pipeline.py lacks {constant}"
        readme = (folder / "README.md").read_text()
        assert FACTS["readme_inputs_heading"] in readme  # GitHub's anchor: #inputs- (the guide's links)


def test_the_guides_components_are_where_it_links_them():
    for name, folder in FACTS["components"].items():
        assert (REPO_ROOT / folder / "component.py").is_file(), name
        assert (REPO_ROOT / folder / "README.md").is_file(), name


def test_the_guides_kfp_pins_and_venv_are_the_projects():
    quick_start = FACTS["quick_start"]
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    for package, version in quick_start["kfp_pins"].items():
        assert f'"{package}=={version}"' in pyproject
        assert f"{package}=={version}" in quick_start["install"]
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "--no-index", quick_start["venv"] + "/"], cwd=REPO_ROOT, check=False
    )
    assert ignored.returncode == 0, f"{quick_start['venv']} (the guide's venv inside the clone) is not git-ignored"


def test_constants_are_overridden_by_env_and_cli_flags(tmp_path, monkeypatch):
    """... and ``--eval-gpus 0`` (CPU-only clusters) turns the evaluation's GPU request, check and node selector off."""
    monkeypatch.setenv("KFP_FINETUNE_PVC_STORAGE_CLASS", "efs-sc")
    documents = pipeline_documents(compile_named("sft", tmp_path / "env.yaml"))
    patch = documents[1]["platforms"]["kubernetes"]["pipelineConfig"]["workspace"]["kubernetes"]["pvcSpecPatch"]
    assert patch["storageClassName"] == "efs-sc"
    flags = {"pvc_storage_class": "azurefile-csi", "eval_gpus": 0}
    documents = pipeline_documents(compile_named("sft", tmp_path / "flag.yaml", flags))
    patch = documents[1]["platforms"]["kubernetes"]["pipelineConfig"]["workspace"]["kubernetes"]["pvcSpecPatch"]
    assert patch["storageClassName"] == "azurefile-csi"
    executor = documents[0]["deploymentSpec"]["executors"]["exec-lm-eval"]["container"]
    assert "accelerator" not in executor.get("resources", {})
    assert "KFP_FINETUNE_REQUESTED_GPUS" not in {env["name"] for env in executor.get("env", [])}
    assert "nodeSelector" not in documents[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]["exec-lm-eval"]


def test_the_guides_parameter_names_exist_with_the_guides_meaning_everywhere():
    assert FACTS["quick_start"]["required_parameter"] in GUIDE_NAMES
    for algorithm in ("sft", "osft", "lora"):
        targets = fed_by(pipeline_function(algorithm))
        for guide_name, argument in GUIDE_NAMES.items():
            assert argument in {name for _, name in targets.get(guide_name, [])}, (algorithm, guide_name)
    # Minimal pipelines keep one required parameter: the data URI.
    for algorithm in ("sft", "osft", "lora"):
        minimal = pipeline_parameters(pipeline_function(f"{algorithm}-minimal"))
        assert [p.name for p in minimal if p.default is REQUIRED] == ["phase_01_dataset_man_data_uri"]


def with_declared_workspace(snippet: str) -> str:
    """The guide's snippet with the one line KFP needs for ``dsl.WORKSPACE_PATH_PLACEHOLDER``: a declared workspace."""
    decorator = '@dsl.pipeline(name="my-custom-pipeline")'
    assert decorator in snippet
    declared = '@dsl.pipeline(name="my-custom-pipeline", pipeline_config=default_pipeline_config())'
    return "from components._common.workspace import default_pipeline_config\n" + snippet.replace(decorator, declared)


def test_the_guides_custom_pipeline_snippet_compiles_once_it_declares_its_workspace(tmp_path):
    """As written, KFP itself refuses the snippet (a workspace path without a workspace); with the project's
    ``dsl.PipelineConfig`` declared it compiles, the string ``dataset`` routed to ``dataset_path``."""
    snippet = FACTS["custom_pipeline_snippet"]
    assert 'training_backend="mini-trainer"' in snippet and "pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER" in snippet
    script = tmp_path / "my_pipeline.py"
    output = tmp_path / "my_pipeline.yaml"
    compile_line = f"\n\nfrom kfp import compiler\ncompiler.Compiler().compile(my_pipeline, {str(output)!r})\n"
    script.write_text(snippet + compile_line)
    run = _run_script(script, tmp_path)
    assert run.returncode == 1 and "PipelineConfig.workspace.size is not set" in run.stderr  # KFP's own check
    assert not output.exists()

    script.write_text(with_declared_workspace(snippet) + compile_line)
    run = _run_script(script, tmp_path)
    assert run.returncode == 0, run.stderr
    documents = pipeline_documents(output)
    inputs = documents[0]["root"]["dag"]["tasks"]["train-model"]["inputs"]["parameters"]
    constants = {name: value["runtimeValue"]["constant"] for name, value in inputs.items()}
    assert constants["dataset_path"] == "path/to/dataset.jsonl"  # a string `dataset` is routed to the path input
    assert constants["training_algorithm"] == "OSFT" and constants["training_backend"] == "mini-trainer"
    assert constants["pvc_path"] == "{{$.workspace_path}}"
    assert documents[1]["platforms"]["kubernetes"]["pipelineConfig"]["workspace"]["size"] == "50Gi"


def test_a_string_dataset_is_resolved_against_the_workspace(tmp_path):
    from components.training.finetuning.contract import TrainingConfigError
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
def compiled(environment_settings_yamls):
    """Every pipeline compiled with the suite's settings (the session's compile): name -> YAML documents."""
    return {name: pipeline_documents(path) for name, path in environment_settings_yamls.items()}


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
    hardware = FACTS["hardware"]
    # LoRA and GRPO are not in the guide's table; they run on OSFT's single-GPU shape.
    table = {
        name: hardware["osft"] if name in GRPO_PIPELINES else hardware.get(name, hardware[name.replace("lora", "osft")])
        for name in compiled
    }
    for name, documents in compiled.items():
        algorithm = name.split("-")[0]
        row = table[name]
        nodes, gpus, cpu, memory = row["nodes"], row["gpus_per_node"], row["cpu"], row["memory"]
        defaults, constants = _defaults(documents), _train_constants(documents)
        assert defaults["phase_02_train_man_train_workers"] == nodes, name
        assert defaults["phase_02_train_man_train_gpu"] == gpus, name
        # Expert pipelines expose CPU, memory and env as parameters; minimal ones pass constants (or defaults).
        cpu_value = defaults.get("phase_02_train_opt_cpu", constants.get("training_cpu_per_node"))
        memory_value = defaults.get("phase_02_train_opt_memory", constants.get("training_memory_per_node"))
        assert (cpu_value, memory_value) == (cpu, memory), name
        env = defaults.get("phase_02_train_opt_env_vars", constants.get("training_env_vars"))
        if algorithm == "sft":  # the guide: INSTRUCTLAB_NCCL_TIMEOUT_MS is set by default in SFT pipelines
            assert env == {FACTS["troubleshooting"]["nccl_timeout_env"]: "600000"}, name
        else:
            assert env == {}, name


def test_evaluation_requests_a_gpu_on_gpu_nodes(compiled):
    for name, documents in compiled.items():
        if name in GRPO_PIPELINES:  # no evaluation step
            continue
        executor = documents[0]["deploymentSpec"]["executors"]["exec-lm-eval"]["container"]
        accelerator = executor["resources"]["accelerator"]
        assert (accelerator["resourceCount"], accelerator["resourceType"]) == ("1", "nvidia.com/gpu"), name
        platform = documents[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]["exec-lm-eval"]
        label, value = FACTS["troubleshooting"]["eval_gpu_node_label"].split("=")
        assert platform["nodeSelector"]["labels"] == {label: value}, name
        # ... and fails with the guide's "No CUDA GPUs are available" when it sees none (not a silent CPU run).
        assert {"name": "KFP_FINETUNE_REQUESTED_GPUS", "value": "1"} in executor["env"], name


def test_the_guides_troubleshooting_hooks_exist():
    """``Job: <job-name>`` in the training log and the ``training.kubeflow.org/job-name`` pod label."""
    from components.training.finetuning.manifests.trainjob import JOB_NAME_POD_LABEL

    hooks = FACTS["troubleshooting"]
    assert JOB_NAME_POD_LABEL == hooks["pod_label"]
    prefix = hooks["job_log_line"].split("<")[0]
    sources = "\n".join(p.read_text() for p in (REPO_ROOT / "components/training/finetuning").rglob("*.py"))
    assert f'f"{prefix}{{' in sources, f"no {hooks['job_log_line']!r} log line in the training component"


def test_each_troubleshooting_string_is_produced_by_the_error_it_describes(tmp_path, monkeypatch):
    """The strings users search their logs for, from the failures the guide names (end-to-end tests beside each)."""
    import httpx2
    from botocore.exceptions import ClientError
    from huggingface_hub import errors

    from components.data_processing.dataset_download.hub_source import hf_error
    from components.data_processing.dataset_download.s3_source import s3_error
    from components.evaluation.lm_eval.devices import REQUESTED_GPUS_ENV, NoGpuError, resolve_device
    from tests.harness.requests import validate_local_files

    strings = FACTS["error_strings"]
    request = httpx2.Request("GET", "https://huggingface.co/api/datasets/org/gated")
    gated = errors.GatedRepoError("gated", response=httpx2.Response(401, request=request))
    hub = str(hf_error("org/gated", "", gated))
    assert all(text in hub for text in strings["hub_gated_or_private"]) and "hf-token secret" in hub, hub
    denied = ClientError({"Error": {"Code": "AccessDenied"}, "ResponseMetadata": {"HTTPStatusCode": 403}}, "GetObject")
    s3 = str(s3_error("s3://bucket/train.jsonl", denied))
    assert all(text in s3 for text in strings["s3_access_denied"]) and "s3-secret" in s3, s3
    data = tmp_path / "text.jsonl"
    data.write_text('{"text": "not chat"}\n')
    with pytest.raises(ValueError) as not_chat:  # the pipelines' input_format="auto"
        validate_local_files([data], str(data), sink=lambda rows: None)
    assert all(text in str(not_chat.value) for text in strings["invalid_dataset_format"]), not_chat.value
    report = validate_local_files([data], str(data), sink=lambda rows: None, input_format="messages")
    rows = report.failure_message()
    assert all(text in rows for text in strings["invalid_dataset_format"]), rows
    monkeypatch.setenv(REQUESTED_GPUS_ENV, "1")  # this host has no GPU
    with pytest.raises(NoGpuError) as no_gpu:
        resolve_device("", "hf")
    assert all(text in str(no_gpu.value) for text in strings["no_gpu"])
