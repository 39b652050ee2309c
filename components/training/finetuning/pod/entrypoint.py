"""Runs in every TrainJob pod: reads ``run_config.json`` and calls Training Hub's function for the algorithm.

Standard library only (the training image has none of this project's code). Usage: ``entrypoint.py --config <path>``.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components.training.finetuning.contract import RunConfig, RunConfigError, TrainingOptions, load_run_config
from components.training.finetuning.pod import checkpoints, hub_compat, progress_server, rewards
from components.training.finetuning.pod.hub_settings import unsupported_settings
from components.training.finetuning.pod.inputs import EntrypointError, resolve_base_model

#: ``train_model`` algorithm name -> Training Hub function.
TRAINING_HUB_FUNCTIONS = {"sft": "sft", "osft": "osft", "lora": "lora_sft", "grpo": "grpo", "lora_grpo": "lora_grpo"}
#: Per algorithm: Training Hub keyword -> the :class:`TrainingOptions` field passed as-is.
_KEYWORDS = {
    "sft": {"max_tokens_per_gpu": "max_tokens_per_gpu", "random_seed": "seed", "use_liger": "use_liger"},
    "osft": {
        key: key
        for key in (
            "unfreeze_rank_ratio",
            "max_tokens_per_gpu",
            "seed",
            "use_liger",
            "lr_scheduler",
            "checkpoint_at_epoch",
            "save_final_checkpoint",
        )
    },
    # No max_tokens_per_gpu: the Unsloth backend never reads it (effective_batch_size and max_seq_len set memory).
    "lora": {
        "lora_r": "lora_r",
        "lora_alpha": "lora_alpha",
        "lora_dropout": "lora_dropout",
        "lr_scheduler": "lr_scheduler",
        "seed": "seed",
        "save_model": "save_final_checkpoint",
    },
}


def _env_int(env: Mapping[str, str], variable: str) -> int:
    value = env[variable].strip()
    if not value.isdigit():
        raise EntrypointError(f"environment variable {variable}={value!r}: must be a non-negative integer")
    return int(value)


def torchrun_kwargs(env: Mapping[str, str], nproc_per_node: int = 0) -> dict[str, Any]:
    """Training Hub's torchrun arguments (those whose variables are set) from what the job controller injects.

    ``PET_*`` (Kubeflow Trainer, Training Operator v1.7+) first; else Training Operator v1's ``RANK``, ``WORLD_SIZE``
    / processes per node (``nproc_per_node`` when ``PET_NPROC_PER_NODE`` is unset) and ``MASTER_ADDR:MASTER_PORT``
    (port 23456, the operator's default, when unset).

    Raises:
        EntrypointError: A variable is not an integer, or ``WORLD_SIZE`` is not a multiple of the processes per node.
    """
    kwargs: dict[str, Any] = {}
    for name, variable in (("nproc_per_node", "PET_NPROC_PER_NODE"), ("nnodes", "PET_NNODES")):
        if value := env.get(variable):
            kwargs[name] = int(value) if value.isdigit() else value
    for variable in ("PET_NODE_RANK", "RANK"):
        if env.get(variable):
            kwargs["node_rank"] = _env_int(env, variable)
            break
    if "nnodes" not in kwargs and env.get("WORLD_SIZE"):
        processes = kwargs.get("nproc_per_node", nproc_per_node or 1)
        world_size = _env_int(env, "WORLD_SIZE")
        if not isinstance(processes, int) or processes < 1 or world_size % processes:
            raise EntrypointError(
                f"environment variable WORLD_SIZE={world_size}: not a multiple of the processes per node "
                f"({processes!r}), so the node count cannot be derived; set PET_NNODES"
            )
        kwargs.setdefault("nproc_per_node", processes)
        kwargs["nnodes"] = world_size // processes
    if env.get("PET_MASTER_ADDR"):
        kwargs["rdzv_endpoint"] = f"{env['PET_MASTER_ADDR']}:{env.get('PET_MASTER_PORT', '29500')}"
    elif env.get("MASTER_ADDR"):
        kwargs["rdzv_endpoint"] = f"{env['MASTER_ADDR']}:{env.get('MASTER_PORT') or 23456}"
    return kwargs


def lora_variant_kwargs(hp: TrainingOptions) -> dict[str, Any]:
    """``lora_sft``'s QLoRA, DoRA, rsLoRA and init keywords, each only when set (older releases lack them)."""
    kwargs: dict[str, Any] = {}
    if hp.lora_use_dora:
        kwargs["use_dora"] = True
    if hp.lora_use_rslora:
        kwargs["use_rslora"] = True
    if hp.lora_init_weights != "true":
        kwargs["init_lora_weights"] = False if hp.lora_init_weights == "false" else hp.lora_init_weights
    if hp.lora_load_in_8bit:
        kwargs["load_in_8bit"] = True
    if hp.lora_load_in_4bit:
        kwargs.update(
            load_in_4bit=True,
            bnb_4bit_quant_type=hp.lora_bnb_4bit_quant_type,
            bnb_4bit_compute_dtype=hp.lora_bnb_4bit_compute_dtype,
            bnb_4bit_use_double_quant=hp.lora_bnb_4bit_use_double_quant,
        )
    return kwargs


def _algorithm_kwargs(algorithm: str, hp: TrainingOptions, eval_data_path: str) -> dict[str, Any]:
    kwargs = {keyword: getattr(hp, field) for keyword, field in _KEYWORDS[algorithm].items()}
    if algorithm == "sft":
        # instructlab-training's launcher never passes --save_last: the last epoch's checkpoint is the final model.
        kwargs.update(
            checkpoint_at_epoch=True,
            accelerate_full_state_at_epoch=hp.resume and hp.checkpoint_at_epoch,
            fsdp_options={"sharding_strategy": hp.fsdp_sharding_strategy},
        )
    elif algorithm == "osft":
        if hp.max_steps:
            kwargs.update(training_mode="step", max_steps=hp.max_steps)
        if eval_data_path:
            kwargs.update(validation_data_path=eval_data_path, validate_at_final=True)
    else:
        if eval_data_path:
            kwargs["eval_data_path"] = eval_data_path
        kwargs.update(lora_variant_kwargs(hp))
    return kwargs


def _first_row_and_count(path: str) -> tuple[dict[str, Any], int]:
    with open(path, encoding="utf-8") as handle:
        rows = (line for line in handle if line.strip())
        first = next(rows, "")
        return (json.loads(first) if first else {}), (1 if first else 0) + sum(1 for _ in rows)


def grpo_kwargs(run_config: RunConfig, model_path: str, env: Mapping[str, str]) -> dict[str, Any]:
    """Training Hub ``grpo`` / ``lora_grpo`` keywords; every row trains (``n_val=0``: the pipeline evaluates).

    ``reward_answer`` rows get :func:`.rewards.compute_score`; Training Hub scores ``reward_tool_call`` rows itself.
    """
    hp = run_config.hyperparameters
    first_row, rows = _first_row_and_count(run_config.data_path)
    kwargs: dict[str, Any] = {
        "model_path": model_path,
        "ckpt_output_dir": run_config.ckpt_output_dir,
        "data_path": run_config.data_path,
        "n_train": rows,
        "n_val": 0,
        "num_iterations": hp.grpo_iterations,
        "group_size": hp.grpo_group_size,
        "prompt_batch_size": hp.effective_batch_size,
        "learning_rate": hp.learning_rate,
        "temperature": hp.grpo_temperature,
        "max_tokens": hp.grpo_max_new_tokens,
        "max_prompt_length": hp.max_seq_len,
        "n_gpus": max(run_config.nproc_per_node, 1),
        "nnodes": int(env["PET_NNODES"]) if str(env.get("PET_NNODES", "")).isdigit() else 1,
    }
    if "target_tool_name" not in first_row:
        kwargs["reward_fn"] = rewards.compute_score
    if hp.algorithm == "lora_grpo":
        kwargs.update(lora_r=hp.lora_r, lora_alpha=hp.lora_alpha)
        if hp.backend:  # grpo() refuses a backend keyword: verl only
            kwargs["backend"] = hp.backend
    kwargs.update(run_config.mlflow.training_hub_kwargs())
    return kwargs


def training_hub_call(
    run_config: RunConfig, env: Mapping[str, str], model_path: str = ""
) -> tuple[str, dict[str, Any]]:
    """``(Training Hub function name, kwargs)`` for a run config: every hyper-parameter that applies is in ``kwargs``.

    ``model_path`` defaults to the run config's ``model_path``, else ``base_model``; ``env`` holds torchrun's variables.

    Raises:
        EntrypointError: Unknown algorithm, or a setting Training Hub would ignore.
    """
    hp = run_config.hyperparameters
    algorithm = hp.algorithm
    if algorithm not in TRAINING_HUB_FUNCTIONS:
        raise EntrypointError(f"run config algorithm={algorithm!r}: must be one of {sorted(TRAINING_HUB_FUNCTIONS)}")
    eval_data_path = run_config.eval_data_path
    problems = unsupported_settings(algorithm, dataclasses.asdict(hp), bool(eval_data_path))
    if problems:
        raise EntrypointError("; ".join(problems))
    model_path = model_path or run_config.model_path or run_config.base_model
    if algorithm in ("grpo", "lora_grpo"):
        return TRAINING_HUB_FUNCTIONS[algorithm], grpo_kwargs(run_config, model_path, env)
    kwargs = {
        "model_path": model_path,
        "data_path": run_config.data_path,
        "ckpt_output_dir": run_config.ckpt_output_dir,
        "num_epochs": hp.num_epochs,
        "effective_batch_size": hp.effective_batch_size,
        "learning_rate": hp.learning_rate,
        "max_seq_len": hp.max_seq_len,
        "warmup_steps": hp.warmup_steps,
    }
    if algorithm != "lora":
        kwargs["data_output_dir"] = os.path.join(run_config.ckpt_output_dir, "_data")
    kwargs.update(_algorithm_kwargs(algorithm, hp, eval_data_path))
    if hp.backend:
        kwargs["backend"] = hp.backend
    if run_config.jit_checkpoint:
        kwargs["enable_jit_checkpoint"] = True  # save on SIGTERM (a paused TrainJob); training-hub >= 0.11.0
    kwargs.update(run_config.mlflow.training_hub_kwargs())
    kwargs.update(torchrun_kwargs(env, run_config.nproc_per_node))
    return TRAINING_HUB_FUNCTIONS[algorithm], kwargs


#: Where the image lacks flash-attn, each backend's own switch to PyTorch SDPA: (keywords, environment, note).
#: mini-trainer (OSFT, 0.5.1 to 0.9.0) re-raises the ImportError unless ``TESTING=true``, its only switch (seen on an
#: H100, 2026-11-27; ``test_mini_trainer_still_needs_flash_attn_outside_testing`` fails once it falls back by itself).
_SDPA_SWITCHES: dict[str, tuple[dict[str, Any], dict[str, str], str]] = {
    "sft": ({"disable_flash_attn": True}, {}, "SFT runs with PyTorch SDPA attention"),
    "osft": ({}, {"TESTING": "true"}, "OSFT runs with PyTorch SDPA attention (TESTING=true)"),
}


def image_settings(function_name: str, log: Any = print) -> tuple[dict[str, Any], dict[str, str]]:
    """``(keywords, environment variables)`` the training image calls for: empty with flash-attn installed."""
    switch = _SDPA_SWITCHES.get(function_name)
    if switch is None or importlib.util.find_spec("flash_attn") is not None:
        return {}, {}
    keywords, environment, note = switch
    log(f"note: flash-attn is not installed in this image: {note}")
    return dict(keywords), dict(environment)


def gpu_visible() -> bool:
    """Whether this pod sees an NVIDIA GPU (torch's view where torch is installed, else the driver's device files)."""
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - no (or a broken) torch: ask the driver
        return os.path.exists("/dev/nvidia0")


def no_gpu_message(algorithm: str) -> str:
    """The one line a GPU-less training pod ends with."""
    return (
        f"Training Hub {algorithm.upper()} needs an NVIDIA GPU; this pod sees none (No CUDA GPUs are available) — "
        "check the runtime image and the `nvidia.com/gpu` request"
    )


def _training_hub_function(function_name: str, version: str) -> Any:
    """The installed ``training_hub.<function_name>``; one line naming the version when this image lacks it."""
    if version:
        import training_hub

        function = getattr(training_hub, function_name, None)
        if function is not None:
            return function
    raise hub_compat.TrainingHubUnsupported(hub_compat.missing_function_message(version, function_name))


def main(argv: list[str] | None = None) -> int:
    """Reads the config, resolves the model and runs the installed Training Hub with the keywords it takes.

    Returns:
        0 when training returned; 1 when it failed on a pod without a GPU (after :func:`no_gpu_message`).
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, type=Path)
    args = parser.parse_args(argv)
    versions = hub_compat.installed_versions()
    print(hub_compat.version_line(versions), flush=True)
    run_config = load_run_config(args.config)
    env = dict(os.environ)
    hp = run_config.hyperparameters
    if hp.algorithm in TRAINING_HUB_FUNCTIONS:  # else training_hub_call names the rule; checked before any download
        function = _training_hub_function(TRAINING_HUB_FUNCTIONS[hp.algorithm], versions["training-hub"])
    model_path = run_config.model_path or resolve_base_model(
        run_config.base_model, Path(run_config.model_cache_dir), run_config.pvc_mounts, env
    )
    function_name, kwargs = training_hub_call(run_config, env, model_path=model_path)
    resume, message = checkpoints.resume_kwargs(hp.algorithm, Path(run_config.ckpt_output_dir), hp.resume)
    if message:
        print(message)
    kwargs.update(resume)
    image_keywords, image_environment = image_settings(function_name)
    kwargs.update(image_keywords)
    os.environ.update(image_environment)  # inherited by the training processes Training Hub starts
    kwargs = hub_compat.select_keywords(function_name, function, kwargs, versions["training-hub"])
    print(f"training-hub {function_name}(" + ", ".join(f"{k}={v!r}" for k, v in sorted(kwargs.items())) + ")")
    progress = progress_server.start_for_run(run_config, kwargs.get("node_rank", 0), env=env)
    succeeded = False
    try:
        function(**kwargs)
        succeeded = True
    except (AssertionError, ImportError, RuntimeError):  # how Training Hub's backends fail without CUDA
        if gpu_visible():
            raise
        sys.stdout.flush()
        print(no_gpu_message(hp.algorithm), file=sys.stderr, flush=True)
        return 1
    finally:
        if progress is not None:
            progress.stop(succeeded, run_config.progress.termination_log)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RunConfigError, EntrypointError, hub_compat.TrainingHubUnsupported) as error:  # one line, no traceback
        sys.exit(f"entrypoint: {error}")
