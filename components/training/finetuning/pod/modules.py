"""The modules the training pods import, staged onto the PVC under their package names."""

#: The Training Hub pods' code (standard library only at import), staged under ``<run dir>/code/`` (``launch.py``);
#: the ``transformers`` backend stages these and its trainer (``transformers_backend.STAGED_MODULES``).
POD_MODULES = (
    "components._common.s3",
    "components.training.finetuning.pod.checkpoints",
    "components.training.finetuning.pod.entrypoint",
    "components.training.finetuning.pod.grpo_call",
    "components.training.finetuning.pod.hub_compat",
    "components.training.finetuning.pod.inputs",
    "components.training.finetuning.pod.lora_variants",
    "components.training.finetuning.pod.metrics",
    "components.training.finetuning.pod.progress_server",
    "components.training.finetuning.pod.rewards",
    "components.training.finetuning.pod.run_config",
    "components.training.finetuning.pod.trainer_status",
)
