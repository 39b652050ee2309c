"""Orthogonal subspace fine-tuning (OSFT), minimal flavor.

``PYTHONPATH=$(pwd) python pipelines/training/osft_minimal/pipeline.py`` writes ``pipeline.yaml`` beside it;
edit it as the RHOAI guide's *Editing Existing Pipelines* describes.
"""

# =============================================================================
# PVC Configuration (COMPILE-TIME settings)
# =============================================================================
PVC_SIZE = "50Gi"
PVC_STORAGE_CLASS = "nfs-csi"
PVC_ACCESS_MODES = ["ReadWriteMany"]
PIPELINE_NAME = "osft-minimal-pipeline"

# Step images (COMPILE-TIME settings): "" = the published quay.io/kfp-finetune/kfp-finetune:<version>
IMAGE = ""  # or your build of the Containerfile (README, "Run on a cluster")
EVAL_IMAGE = ""  # "" = IMAGE if set, else the published <version>-cuda build (the CPU one when eval_gpus is 0)
# Other settings (settings.py) are pipeline_settings keywords; KFP_FINETUNE_<NAME> and compile flags override all.

from kfp import dsl  # noqa: E402

from pipelines.training.finetuning import tasks  # noqa: E402
from pipelines.training.finetuning.settings import pipeline_settings  # noqa: E402

SETTINGS = pipeline_settings(PVC_SIZE, PVC_STORAGE_CLASS, PVC_ACCESS_MODES, PIPELINE_NAME, IMAGE, EVAL_IMAGE)
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
    """
    dataset_task = tasks.dataset_step(
        dataset_download,
        SETTINGS,
        dataset_uri=phase_01_dataset_man_data_uri,
        subset_count=phase_01_dataset_opt_subset,
        max_seq_len=8192,  # train_model's training_max_seq_len, for the token statistics
    )

    training_task = train_model(
        **tasks.training_inputs(SETTINGS, dataset_task),
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
    )
    tasks.set_up_training(training_task, SETTINGS, "Fine-tune (OSFT)")

    eval_task = tasks.evaluate_base_and_tuned(
        lm_eval,
        SETTINGS,
        dataset_task,
        training_task,
        base_model=phase_02_train_man_train_model,
        evaluate_base_model=phase_03_eval_opt_evaluate_base_model,
        task_names=phase_03_eval_man_eval_tasks,
        allow_empty_eval_dataset=True,
    )

    tasks.registry_step(
        model_registry,
        SETTINGS,
        dataset_task,
        training_task,
        eval_task,
        registry_address=phase_04_registry_man_address,
        model_name=phase_04_registry_man_reg_name,
        model_version=phase_04_registry_man_reg_version,
    )


if __name__ == "__main__":
    tasks.compile_beside(osft_minimal_pipeline, __file__)
