"""Which ``train_model`` settings Training Hub's backends take; the rest is refused (or, where left on, noted)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: ``(parameter, the only accepted value, why)``: the step-interval checkpoints are the project's trainer's.
_LOCAL_ONLY = ("checkpoint_interval_steps", 0, "step-interval checkpoints are the project's trainer's")
#: Training Hub's GRPO (verl, ART) runs by iterations and has none of these switches.
_GRPO_UNSUPPORTED = (
    _LOCAL_ONLY,
    ("use_liger", False, "Training Hub's GRPO backends have no Liger option"),
    ("checkpoint_at_epoch", False, "GRPO checkpoints per iteration, not per epoch"),
    ("fsdp_sharding_strategy", "FULL_SHARD", "verl shards fully; ART does not use FSDP"),
    ("max_steps", 0, "GRPO stops after grpo_iterations"),
    ("lr_scheduler", "cosine", "Training Hub's GRPO does not forward a scheduler"),
    ("warmup_steps", 0, "Training Hub's GRPO does not forward warm-up steps"),
    *(
        (name, value, f"{what} is a lora_sft option")
        for name, value, what in (
            ("lora_use_dora", False, "DoRA"),
            ("lora_use_rslora", False, "rsLoRA"),
            ("lora_init_weights", "true", "the LoRA init"),
            ("lora_load_in_4bit", False, "QLoRA"),
            ("lora_load_in_8bit", False, "QLoRA"),
        )
    ),
)
#: Per algorithm: the settings its Training Hub backend cannot honour, ``(parameter, the only accepted value, why)``.
UNSUPPORTED_SETTINGS: dict[str, tuple[tuple[str, Any, str], ...]] = {
    "sft": (
        _LOCAL_ONLY,
        ("lr_scheduler", "cosine", "instructlab-training's launcher does not forward a scheduler (always cosine)"),
        ("max_steps", 0, "instructlab-training stops by epochs only"),
        (
            "save_final_checkpoint",
            True,
            "instructlab-training saves the model at every epoch's end (the last is final)",
        ),
    ),
    "osft": (_LOCAL_ONLY, ("fsdp_sharding_strategy", "FULL_SHARD", "mini-trainer always shards fully (FSDP2)")),
    "lora": (
        _LOCAL_ONLY,
        ("use_liger", False, "the Unsloth backend has no Liger option"),
        ("checkpoint_at_epoch", False, "the Unsloth backend checkpoints by steps, not epochs"),
        ("fsdp_sharding_strategy", "FULL_SHARD", "the Unsloth backend does not use FSDP"),
        ("max_steps", 0, "the Unsloth backend stops by epochs only"),
    ),
    "grpo": _GRPO_UNSUPPORTED,
    "lora_grpo": _GRPO_UNSUPPORTED,
}
#: Settings Training Hub's backends have no switch for: the run goes on with their behaviour, said in one line.
ALWAYS_ON_SETTINGS = (
    (
        "gradient_checkpointing",
        True,
        "Training Hub's backends (instructlab-training, mini-trainer, Unsloth) always recompute activations when the "
        "model supports it; more GPU memory is not used for speed",
    ),
)


def settings_not_supported(
    table: tuple[tuple[str, Any, str], ...], hyperparameters: Mapping[str, Any], trainer: str
) -> list[str]:
    """One message per ``(parameter, the only accepted value, why)`` of ``table`` that ``hyperparameters`` break."""
    return [
        f"{name}={hyperparameters[name]!r} is not supported by {trainer} ({why}); use {accepted!r}"
        for name, accepted, why in table
        if hyperparameters[name] != accepted
    ]


def unsupported_settings(algorithm: str, hyperparameters: Mapping[str, Any], has_eval_data: bool) -> list[str]:
    """One message per setting Training Hub would silently ignore for ``algorithm`` (empty when all reach it).

    ``has_eval_data`` is accepted for the callers' sake: an eval split is never refused (SFT ignores it; the
    pipeline's evaluation step scores it).
    """
    table = UNSUPPORTED_SETTINGS.get(algorithm, ())
    problems = settings_not_supported(table, hyperparameters, f"training-hub {algorithm}")
    if algorithm == "osft" and not (hyperparameters["save_final_checkpoint"] or hyperparameters["checkpoint_at_epoch"]):
        problems.append("save_final_checkpoint=False needs checkpoint_at_epoch=True, else no model is saved")
    return problems


def ignored_settings(hyperparameters: Mapping[str, Any]) -> list[str]:
    """One note per setting of :data:`ALWAYS_ON_SETTINGS` turned off, which Training Hub leaves on."""
    return [
        f"note: training_{name}={hyperparameters[name]!r} has no effect on Training Hub: {why}"
        for name, value, why in ALWAYS_ON_SETTINGS
        if hyperparameters[name] != value
    ]
