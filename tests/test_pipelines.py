"""The fine-tuning pipelines (the guide's six, grpo, lora-grpo): compile, names, order, YAML facts, repeatability."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipelines.compile import compile_named, pipeline_function
from pipelines.training.finetuning import PIPELINES
from pipelines.training.finetuning.interface import pipeline_parameters, task_wiring
from pipelines.training.finetuning.settings import CompileSettings
from tests.harness.compiled import CONTAINER_SPEC_LIMIT_BYTES, GRPO_PIPELINES, container_spec_sizes, pipeline_documents

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def compiled(default_settings_yamls) -> dict[str, list[dict]]:
    """Every pipeline compiled with default settings (the session's compile): name -> YAML documents."""
    return {name: pipeline_documents(path) for name, path in default_settings_yamls.items()}


def test_the_fast_loader_reads_a_compiled_pipeline_as_pyyaml_does(default_settings_yamls):
    """``pipeline_documents`` (and the CLI's ``read_pipeline_documents``) parse with libyaml: the same documents."""
    text = default_settings_yamls["osft"].read_text()
    assert pipeline_documents(text) == list(yaml.safe_load_all(text))


def _inputs(documents: list[dict]) -> dict[str, dict]:
    return documents[0]["root"]["inputDefinitions"]["parameters"]


def test_all_six_pipelines_compile(compiled):
    """Every task of every pipeline gets ``{{$.workspace_path}}`` as ``pvc_path``: KFP's driver mounts the workspace
    in a task whose inputs hold it (kubeflow/pipelines 2.16.0 driver.go:475-486), so a PVC that cannot be provisioned
    or mounted stops the first step, not the third."""
    assert set(compiled) == {"sft", "sft-minimal", "osft", "osft-minimal", "lora", "lora-minimal", "grpo", "lora-grpo"}
    for name, documents in compiled.items():
        tasks = documents[0]["root"]["dag"]["tasks"]
        # lm-eval: the base model's evaluation (before training); lm-eval-2: the fine-tuned model's. GRPO: the reward
        # gate decides, not an evaluation (tests/test_grpo_pipelines.py).
        evaluations = set() if name in GRPO_PIPELINES else {"lm-eval", "lm-eval-2"}
        assert set(tasks) == {"dataset-download", "train-model", "model-registry", *evaluations}, name
        for task, definition in tasks.items():
            pvc_path = definition["inputs"]["parameters"].get("pvc_path", {})
            assert pvc_path.get("runtimeValue", {}).get("constant") == "{{$.workspace_path}}", (name, task)
        assert documents[1]["platforms"]["kubernetes"]["pipelineConfig"]["workspace"]["size"], name


def test_base_model_is_evaluated_before_training_and_feeds_the_tuned_evaluation(compiled):
    for name, documents in compiled.items():
        if name in GRPO_PIPELINES:
            continue
        tasks = documents[0]["root"]["dag"]["tasks"]
        base, tuned = tasks["lm-eval"], tasks["lm-eval-2"]
        # It needs only the base model (a parameter) and the held-out split; training waits for it (one GPU step at
        # a time: the guide's hardware table, tests/test_gpu_demand.py).
        assert base.get("dependentTasks") == ["dataset-download"], name
        assert "lm-eval" in tasks["train-model"]["dependentTasks"], name
        assert base["inputs"]["artifacts"]["eval_dataset"]["taskOutputArtifact"]["producerTask"] == "dataset-download"
        assert "model" not in base["inputs"].get("artifacts", {})
        source = base["inputs"]["parameters"]["model_source"]["componentInputParameter"]
        assert source == "phase_02_train_man_train_model", name
        assert base["inputs"]["parameters"]["skip_unusable_model_source"]["runtimeValue"]["constant"] is True
        switch = base["inputs"]["parameters"]["enabled"]["componentInputParameter"]
        assert switch == "phase_03_eval_opt_evaluate_base_model" and _inputs(documents)[switch]["defaultValue"] is True
        assert "enabled" not in tuned["inputs"]["parameters"]  # the fine-tuned evaluation always runs
        # The same tasks and settings for both evaluations.
        for parameter, value in tuned["inputs"]["parameters"].items():
            if "componentInputParameter" in value and parameter != "enabled":
                assert base["inputs"]["parameters"][parameter] == value, (name, parameter)
        baseline = tuned["inputs"]["artifacts"]["baseline_results"]["taskOutputArtifact"]
        assert baseline == {"outputArtifactKey": "results", "producerTask": "lm-eval"}
        assert base["cachingOptions"].get("enableCache") is True  # free on a re-run with the same inputs
        assert not tuned["cachingOptions"].get("enableCache")
        # Both get the evaluation's GPU and resources.
        executors = documents[0]["deploymentSpec"]["executors"]
        assert (
            executors["exec-lm-eval"]["container"]["resources"] == executors["exec-lm-eval-2"]["container"]["resources"]
        )
        registry = tasks["model-registry"]["inputs"]["artifacts"]["eval_results"]["taskOutputArtifact"]
        assert registry == {"outputArtifactKey": "results", "producerTask": "lm-eval-2"}


def test_registry_gate_parameters_exist_and_gate_nothing_by_default(compiled):
    for name in ("sft", "osft", "lora"):
        inputs = _inputs(compiled[name])
        defaults = {
            "phase_04_registry_opt_min_improvement_metric": "",
            "phase_04_registry_opt_min_improvement": 0.0,
            "phase_04_registry_opt_max_regression": -1.0,
            "phase_04_registry_opt_max_regression_relative": False,
        }
        assert {key: inputs[key]["defaultValue"] for key in defaults} == defaults, name


def test_dashboard_order_is_phase_then_man_before_opt():
    """Each pipeline function lists its parameters by phase, the ``man`` ones of a phase before its ``opt`` ones."""
    for name in PIPELINES:
        names = [p.name for p in pipeline_parameters(pipeline_function(name))]
        keys = [(n[:8], n.split("_")[3] != "man") for n in names]
        assert keys == sorted(keys), name


def test_osft_minimal_golden_parameters(compiled):
    """Names, types and defaults of the minimal OSFT pipeline, exactly (the RHOAI guidance defaults)."""
    inputs = _inputs(compiled["osft-minimal"])
    summary = {name: (spec["parameterType"], spec.get("defaultValue")) for name, spec in inputs.items()}
    assert summary == {
        "phase_01_dataset_man_data_uri": ("STRING", None),
        "phase_01_dataset_opt_subset": ("NUMBER_INTEGER", 0.0),  # the guide's Quick Start subset (0 = all)
        "phase_02_train_man_train_model": ("STRING", "Qwen/Qwen2.5-1.5B-Instruct"),
        "phase_02_train_man_train_epochs": ("NUMBER_INTEGER", 1.0),  # the guide's osft_minimal_pipeline
        "phase_02_train_man_train_batch": ("NUMBER_INTEGER", 128.0),
        "phase_02_train_man_train_tokens": ("NUMBER_INTEGER", 64000.0),
        "phase_02_train_man_train_unfreeze": ("NUMBER_DOUBLE", 0.25),
        "phase_02_train_man_train_workers": ("NUMBER_INTEGER", 1.0),
        "phase_02_train_man_train_gpu": ("NUMBER_INTEGER", 1.0),
        "phase_03_eval_man_eval_tasks": ("LIST", ["arc_easy"]),
        "phase_03_eval_opt_evaluate_base_model": ("BOOLEAN", True),
        "phase_04_registry_man_address": ("STRING", ""),
        "phase_04_registry_man_reg_name": ("STRING", ""),
        "phase_04_registry_man_reg_version": ("STRING", ""),
    }
    assert "isOptional" not in inputs["phase_01_dataset_man_data_uri"]


def test_minimal_pipelines_fix_hidden_knobs_to_the_declared_defaults(compiled):
    """Hidden parameters are constants or the component's default: OSFT's rate 5e-6, SFT's 2e-5, LoRA's 2e-4."""
    expected = {"osft-minimal": 5e-6, "sft-minimal": 2e-5, "lora-minimal": 2e-4}
    for name, learning_rate in expected.items():
        spec = compiled[name][0]
        kind, value = task_wiring(spec)["train-model"].get("training_learning_rate", ("default", None))
        if kind == "default":
            declared = spec["components"]["comp-train-model"]["inputDefinitions"]["parameters"]
            value = declared["training_learning_rate"]["defaultValue"]
        assert kind != "parameter" and value == pytest.approx(learning_rate), name


def test_algorithm_specific_knobs_appear_only_in_their_pipelines(compiled):
    for name, documents in compiled.items():
        inputs = set(_inputs(documents))
        assert ("phase_02_train_man_train_unfreeze" in inputs) == name.startswith("osft")
        assert ("phase_02_train_man_train_lora_r" in inputs) == name.startswith("lora")
        assert ("phase_02_train_man_train_group_size" in inputs) == (name in GRPO_PIPELINES)


def _component_inputs(documents: list[dict], component: str) -> set[str]:
    definition = documents[0]["components"][f"comp-{component}"]["inputDefinitions"]
    return set(definition.get("parameters", {}))


WIRED = {
    # max_seq_len is wired from training; the three size/time bounds (issue 28) are component-level settings only
    "dataset-download": {"max_seq_len", "max_line_bytes", "max_decompressed_bytes", "download_deadline_s", "pvc_path"},
    "train-model": {
        "training_algorithm",
        "pvc_path",
        "dataset_path",
        "hf_token_secret_name",
        "s3_secret_name",
        "task_config",
        "run_id",
        "task_name",
    },
    # pvc_path: the workspace placeholder, where the remote evaluation backends find the model too; a remote
    # evaluation's timeout and cleanup policy keep the component's defaults (issue 43a's Workflow size budget)
    "lm-eval": {
        "model_source",
        "skip_unusable_model_source",
        "pvc_path",
        "eval_timeout_seconds",
        "eval_cleanup_policy",
    },
    "model-registry": {"ca_bundle_path", "pipeline_run_id", "pipeline_run_name", "pvc_path"}
    # issue 37: the pipelines expose the modelcar target and the deploy switch; the details keep the component's
    # defaults (pass them in the model_registry call to change them)
    | {"modelcar_lora_weights", "deploy_service_name", "deploy_namespace"}
    | {"deploy_runtime", "deploy_runtime_image", "deploy_gpus", "deploy_timeout_seconds"},
}


#: Component arguments only one algorithm's pipelines expose.
ALGORITHM_ONLY = {
    "training_unfreeze_rank_ratio": "osft",
    "training_lora_r": "lora",
    "training_lora_alpha": "lora",
    "training_lora_dropout": "lora",
    **{f"training_lora_{name}": "lora" for name in ("use_dora", "use_rslora", "init_weights", "load_in_4bit")},
    **{f"training_lora_{name}": "lora" for name in ("load_in_8bit", "bnb_4bit_quant_type", "bnb_4bit_compute_dtype")},
    "training_lora_bnb_4bit_use_double_quant": "lora",
    # GRPO's knobs: the grpo and lora-grpo pipelines (tests/test_grpo_pipelines.py)
    **{f"training_grpo_{name}": "grpo" for name in ("iterations", "group_size", "temperature", "max_new_tokens")},
}


def test_expert_pipelines_expose_every_component_knob(compiled):
    """Every plain parameter of the four components is a run-time parameter of the expert pipelines."""
    for name in ("sft", "osft", "lora"):
        wiring = task_wiring(compiled[name][0])
        for component in WIRED:
            exposed = {argument for argument, (kind, _) in wiring[component].items() if kind == "parameter"}
            knobs = _component_inputs(compiled[name], component) - WIRED[component]
            algorithm_specific = {argument for argument, owner in ALGORITHM_ONLY.items() if owner != name}
            missing = knobs - exposed - algorithm_specific
            assert not missing, f"{name}: {component} knobs not exposed: {sorted(missing)}"
            assert not exposed & algorithm_specific, f"{name} exposes another algorithm's knobs"


def test_workspace_pvc_is_a_compile_time_setting(tmp_path, monkeypatch):
    """... and no secret value of the environment reaches the compiled YAML."""
    secrets = {"HF_TOKEN": "hf_SECRETVALUE123", "AWS_SECRET_ACCESS_KEY": "AWSSECRET987", "KFP_TOKEN": "kfpTOKEN555"}
    for key, value in secrets.items():
        monkeypatch.setenv(key, value)
    settings = CompileSettings(pvc_size="200Gi", pvc_storage_class="ocs-cephfs", pvc_access_modes=("ReadWriteMany",))
    text = compile_named("sft", tmp_path / "sft.yaml", settings).read_text()
    assert not [value for value in secrets.values() if value in text]
    documents = pipeline_documents(text)
    workspace = documents[1]["platforms"]["kubernetes"]["pipelineConfig"]["workspace"]
    assert workspace["size"] == "200Gi"
    assert workspace["kubernetes"]["pvcSpecPatch"] == {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "ocs-cephfs",
    }
    assert not any("pvc" in parameter for parameter in _inputs(documents))


def test_training_step_does_not_cache_and_data_step_does(compiled):
    tasks = compiled["sft"][0]["root"]["dag"]["tasks"]
    assert tasks["dataset-download"]["cachingOptions"].get("enableCache") is True
    for task in ("train-model", "model-registry"):
        assert not tasks[task]["cachingOptions"].get("enableCache")


def test_every_tasks_container_spec_is_at_most_16_kib_and_installs_nothing(compiled):
    """One delivery: each task names the project's image and runs the wrapper's source; nothing embedded, installed."""
    for name, documents in compiled.items():
        sizes = container_spec_sizes(documents[0])
        assert set(sizes) == {f"exec-{t}" for t in documents[0]["root"]["dag"]["tasks"]}, name
        assert all(0 < size <= CONTAINER_SPEC_LIMIT_BYTES for size in sizes.values()), (name, sizes)
        for executor in documents[0]["deploymentSpec"]["executors"].values():
            command = "\n".join(executor["container"]["command"])
            assert "pip install" not in command and "__KFP_EMBEDDED_ARCHIVE_B64" not in command, name


def test_compile_is_reproducible(tmp_path, default_settings_yamls):
    """Two compiles of the same code give the same YAML, byte for byte (nothing embedded: no archive time stamps)."""
    again = compile_named("lora", tmp_path / "lora.yaml", CompileSettings()).read_text()
    assert again == default_settings_yamls["lora"].read_text()


def test_compile_settings_validate_and_read_the_environment():
    settings = CompileSettings.from_env(
        {"KFP_FINETUNE_PVC_SIZE": "1Ti", "KFP_FINETUNE_PVC_ACCESS_MODES": "ReadWriteOnce, ReadOnlyMany"},
        pvc_storage_class="gp3",
    )
    assert (settings.pvc_size, settings.pvc_access_modes) == ("1Ti", ("ReadWriteOnce", "ReadOnlyMany"))
    assert settings.workspace_pvc_patch()["storageClassName"] == "gp3"
    with pytest.raises(ValueError, match="pvc_size must be a Kubernetes quantity"):
        CompileSettings(pvc_size="fifty")
    with pytest.raises(ValueError, match="pvc_access_modes"):
        CompileSettings(pvc_access_modes=("ReadWriteSometimes",))
    with pytest.raises(ValueError, match="eval_node_selector must be 'key=value'"):
        CompileSettings(eval_node_selector="gpu")
    with pytest.raises(ValueError, match="KFP_FINETUNE_EVAL_GPUS='one': eval_gpus must be an integer"):
        CompileSettings.from_env({"KFP_FINETUNE_EVAL_GPUS": "one"})


def test_custom_pipeline_importing_components_compiles(tmp_path):
    from kfp import compiler

    from pipelines.examples.custom_pipeline import validate_and_evaluate

    path = tmp_path / "custom.yaml"
    compiler.Compiler().compile(validate_and_evaluate, str(path))
    tasks = yaml.safe_load(path.read_text())["root"]["dag"]["tasks"]
    assert {"dataset-download", "lm-eval", "importer"} <= set(tasks)


def test_kfp_resource_setters_still_read_the_whole_stack(monkeypatch):
    """Why ``build_pipeline`` runs a module in a thread of its own (``pipelines/compile.py``): kfp 2.15-2.17's
    ``_ensure_container_spec_exists`` calls ``inspect.stack()``. Fails once kfp stops: then drop the thread."""
    import inspect

    from kfp import dsl
    from kfp.dsl import pipeline_task

    calls = []
    real_stack = inspect.stack
    monkeypatch.setattr(pipeline_task.inspect, "stack", lambda *args: calls.append(1) or real_stack(*args))

    @dsl.component
    def noop():
        pass

    @dsl.pipeline
    def probe():
        noop().set_cpu_limit("1").set_memory_request("1Gi")

    assert probe is not None
    assert len(calls) == 2
