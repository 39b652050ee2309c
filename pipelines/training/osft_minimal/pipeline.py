"""Orthogonal subspace fine-tuning (OSFT), minimal flavor.

Compile: ``PYTHONPATH=$(pwd) python pipelines/training/osft_minimal/pipeline.py`` writes ``pipeline.yaml`` beside
this file. Edit the compile-time constants below, or the run-time parameters of
``osft_minimal_pipeline`` (its signature), as the RHOAI guide's *Editing Existing Pipelines* describes.
"""

# =============================================================================
# PVC Configuration (COMPILE-TIME settings)
# =============================================================================
PVC_SIZE = "50Gi"
PVC_STORAGE_CLASS = "nfs-csi"
PVC_ACCESS_MODES = ["ReadWriteMany"]
PIPELINE_NAME = "osft-minimal-pipeline"

# =============================================================================
# Step images (COMPILE-TIME settings): every step runs on the project's image, built from the Containerfile
# =============================================================================
IMAGE = ""  # "" = the published quay.io/kfp-finetune/kfp-finetune:<version>; or your build (README, "Run on a cluster")
EVAL_IMAGE = ""  # "" = IMAGE if set, else the published <version>-cuda build (the CPU one when EVAL_GPUS = 0)

# The steps' other settings are compile-time too: pass them to pipeline_settings below (e.g. eval_cpu_limit="8",
# dataset_memory_request="4Gi"; pipelines/training/finetuning/settings.py names every one). KFP_FINETUNE_<NAME>
# environment variables and `kfp-finetune compile` flags override them.
# =============================================================================

from kfp import compiler, dsl  # noqa: E402

from pipelines.training.finetuning import tasks  # noqa: E402
from pipelines.training.finetuning.settings import pipeline_settings  # noqa: E402

#: The constants above, then KFP_FINETUNE_* variables, then `kfp-finetune compile` flags.
SETTINGS = pipeline_settings(
    pvc_size=PVC_SIZE,
    pvc_storage_class=PVC_STORAGE_CLASS,
    pvc_access_modes=PVC_ACCESS_MODES,
    pipeline_name=PIPELINE_NAME,
    image=IMAGE,
    eval_image=EVAL_IMAGE,
)
#: The four components, each built for the step images above.
dataset_download, train_model, lm_eval, model_registry = tasks.step_components(SETTINGS)


@dsl.pipeline(name=SETTINGS.pipeline_name, pipeline_config=tasks.pipeline_config(SETTINGS))
@tasks.described  # each parameter's description: its component argument's, unless written in Args
def osft_minimal_pipeline(
    phase_01_dataset_man_data_uri: str,
    phase_01_dataset_opt_subset: int = 0,
    phase_02_train_man_train_model: str = "Qwen/Qwen2.5-1.5B-Instruct",
    phase_02_train_man_train_epochs: int = 1,
    phase_02_train_man_train_batch: int = 128,
    phase_02_train_man_train_tokens: int = 64000,
    phase_02_train_man_train_workers: int = 1,
    phase_02_train_man_train_gpu: int = 1,
    phase_02_train_man_train_unfreeze: float = 0.25,
    phase_03_eval_man_eval_tasks: list = ["arc_easy"],
    phase_03_eval_opt_evaluate_base_model: bool = True,
    phase_04_registry_man_address: str = "",
    phase_04_registry_man_reg_name: str = "",
    phase_04_registry_man_reg_version: str = "",
):
    """Orthogonal subspace fine-tuning (OSFT), minimal flavor.

    Only the parameters that matter are exposed (RHOAI defaults: unfreeze ratio 0.25, lr 5e-6, batch 128, 1 epoch).

    Args:
        phase_03_eval_opt_evaluate_base_model: Evaluate the base model too, on the same tasks with the same settings,
            before training (it holds the evaluation's GPU while it runs, so training waits for it: one GPU step at a
            time, as the guide's hardware table sizes the cluster; cached on re-runs). The fine-tuned evaluation then
            reports base, fine-tuned and delta per task and metric, whether each change is beyond noise, and feeds the
            registry's improvement and regression gates. An `oci://`, `s3://` or `pvc://` base model, a local path the
            evaluation pod lacks, or a base model without chat template while `phase_03_eval_opt_chat_template` is on
            is skipped (no deltas). `False`: the task only writes a skipped result (its pod still starts, briefly).
    """
    dataset_task = dataset_download(
        pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER,
        dataset_uri=phase_01_dataset_man_data_uri,
        subset_count=phase_01_dataset_opt_subset,
        max_seq_len=8192,  # train_model's training_max_seq_len, for the token statistics
    )
    dataset_task.set_display_name("Download and validate dataset")
    tasks.set_up_dataset(dataset_task, SETTINGS)

    training_task = train_model(
        pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER,
        dataset=dataset_task.outputs["train_dataset"],
        eval_dataset=dataset_task.outputs["eval_dataset"],
        training_algorithm="osft",
        training_base_model=phase_02_train_man_train_model,
        training_num_epochs=phase_02_train_man_train_epochs,
        training_effective_batch_size=phase_02_train_man_train_batch,
        training_max_tokens_per_gpu=phase_02_train_man_train_tokens,
        training_num_nodes=phase_02_train_man_train_workers,
        training_gpus_per_node=phase_02_train_man_train_gpu,
        training_unfreeze_rank_ratio=phase_02_train_man_train_unfreeze,
        training_cpu_per_node="8",
        training_memory_per_node="32Gi",
        hf_token_secret_name=SETTINGS.hf_token_secret,
        s3_secret_name=SETTINGS.s3_secret,
        run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        task_name=dsl.PIPELINE_TASK_NAME_PLACEHOLDER,
    )
    training_task.set_display_name("Fine-tune (OSFT)")
    tasks.set_up_training(training_task, SETTINGS)

    # The same tasks and settings for the base model and the fine-tuned model (edit them here, once).
    evaluation_settings = dict(
        pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER,
        eval_dataset=dataset_task.outputs["eval_dataset"],
        task_names=phase_03_eval_man_eval_tasks,
        allow_empty_eval_dataset=True,
    )
    # The base model, before training (it needs only the base model and the held-out split); its results are the
    # fine-tuned evaluation's baseline. Cached: free on a re-run with the same base model, data and tasks.
    base_eval_task = lm_eval(
        model_source=phase_02_train_man_train_model,
        enabled=phase_03_eval_opt_evaluate_base_model,
        skip_unusable_model_source=True,  # an oci://, s3:// or pvc:// base model: skipped, not failed
        **evaluation_settings,
    )
    base_eval_task.set_display_name("Evaluate base model (lm-eval)")
    tasks.set_up_base_evaluation(base_eval_task, SETTINGS)
    # One GPU step at a time (the guide's hardware table): training starts once the base model's evaluation is done.
    training_task.after(base_eval_task)

    eval_task = lm_eval(
        model=training_task.outputs["output_model"],
        baseline_results=base_eval_task.outputs["results"],
        **evaluation_settings,
    )
    eval_task.set_display_name("Evaluate (lm-eval)")
    tasks.set_up_evaluation(eval_task, SETTINGS)

    registry_task = model_registry(
        pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER,
        model=training_task.outputs["output_model"],
        eval_metrics=eval_task.outputs["metrics"],
        eval_results=eval_task.outputs["results"],
        train_metrics=training_task.outputs["output_metrics"],
        dataset=dataset_task.outputs["train_dataset"],
        registry_address=phase_04_registry_man_address,
        model_name=phase_04_registry_man_reg_name,
        model_version=phase_04_registry_man_reg_version,
        pipeline_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        pipeline_run_name=dsl.PIPELINE_JOB_NAME_PLACEHOLDER,
    )
    registry_task.set_display_name("Register model")
    tasks.set_up_registry(registry_task, SETTINGS)


if __name__ == "__main__":
    from pathlib import Path

    output = Path(__file__).resolve().with_name("pipeline.yaml")
    compiler.Compiler().compile(osft_minimal_pipeline, str(output))
    print(f"Compiled pipeline {SETTINGS.pipeline_name!r} to {output}")
