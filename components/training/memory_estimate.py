"""GPU memory per GPU for a run, from Training Hub's own estimator, fed a meta-device model from ``config.json`` only.

No weight is read or downloaded and nothing is written into Training Hub's package.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

GIB = 1024**3
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"  # GPU Feature Discovery's node labels: memory per GPU in MiB,
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"  # and the GPU model


class EstimateUnavailable(Exception):
    """No estimate can be made here (no Training Hub / torch, or no readable ``config.json``); the message says why."""


@dataclasses.dataclass(frozen=True)
class RunShape:
    """The ``train_model`` settings of those names, the whole job's GPUs and QLoRA's ``"4bit"``/``"8bit"``/``""``."""

    algorithm: str
    base_model: str
    num_gpus: int
    max_tokens_per_gpu: int
    max_seq_len: int
    effective_batch_size: int
    unfreeze_rank_ratio: float
    lora_r: int
    use_liger: bool = False
    quantization: str = ""


@dataclasses.dataclass(frozen=True)
class Estimate:
    """Bytes per GPU: Training Hub's lower bound, expected value and upper bound."""

    low: int
    expected: int
    high: int


def config_directory(base_model: str, env: Mapping[str, str] | None = None) -> Path:
    """A directory holding the model's ``config.json``: the model's own, or a Hub download of that one file.

    Raises:
        EstimateUnavailable: Neither a local directory with a config nor a Hub id, or the download failed.
    """
    env = os.environ if env is None else env
    local = Path(base_model)
    if (local / "config.json").is_file():
        return local
    if "://" in base_model or base_model.startswith(("/", ".")):
        raise EstimateUnavailable(f"base_model={base_model!r}: no config.json readable from here")
    try:
        from huggingface_hub import hf_hub_download

        path = hf_hub_download(base_model, "config.json", token=env.get("HF_TOKEN") or None)
    except Exception as error:  # noqa: BLE001 - offline, gated, unknown id: the estimate is skipped, not the run
        raise EstimateUnavailable(f"base_model={base_model!r}: cannot fetch config.json ({type(error).__name__})")
    return Path(path).parent


def _estimator_class(algorithm: str, quantization: str = ""):
    if algorithm not in ("sft", "osft", "lora"):
        raise EstimateUnavailable(f"Training Hub has no memory estimator for {algorithm} (training plus vLLM rollouts)")
    try:
        from training_hub.profiling import memory_estimator
    except Exception as error:  # noqa: BLE001 - e.g. the launcher's image: no torch
        raise EstimateUnavailable(f"Training Hub's memory estimator is not installed here ({error})") from None
    base = {
        "sft": memory_estimator.BasicEstimator,
        "osft": memory_estimator.OSFTEstimator,
        "lora": memory_estimator.QLoRAEstimator if quantization else memory_estimator.LoRAEstimator,
    }[algorithm]
    weight_bytes = {"4bit": None, "8bit": memory_estimator.FLOAT8_BYTES_N}.get(quantization)

    class FromConfig(base):
        """The estimator on a meta-device model from ``config.json``."""

        config_dir: Path

        def _load_model(self, warn: str, trust_remote_code: bool = False) -> None:
            import torch
            from transformers import AutoConfig, AutoModel

            config = AutoConfig.from_pretrained(self.config_dir, trust_remote_code=trust_remote_code)
            with torch.device("meta"):
                self.model = AutoModel.from_config(config, trust_remote_code=trust_remote_code)
            self.num_params = self.model.num_parameters(only_trainable=False)
            self.num_trainable_params = self.model.num_parameters(only_trainable=True)
            self.num_layers = config.num_hidden_layers
            self.hidden_size = config.hidden_size

        def _update_model_storage(self) -> None:
            return None

        def _calc_subtotal(self):  # noqa: ANN202 - the estimator's own return tuple
            if weight_bytes is not None:
                self.model_bytes = weight_bytes
            return super()._calc_subtotal()

    return FromConfig


def estimate(shape: RunShape, config_dir: Path) -> Estimate:
    """Training Hub's estimate for ``shape``, with the model built from ``config_dir/config.json``.

    Raises:
        EstimateUnavailable: Training Hub (or torch) is not installed, or the config cannot be read.
    """
    estimator_class = _estimator_class(shape.algorithm, shape.quantization)
    estimator_class.config_dir = Path(config_dir)
    common = {
        "num_gpus": max(shape.num_gpus, 1),
        "model_path": shape.base_model,  # Training Hub's own table of known models is keyed by this name
        "batch_size": shape.effective_batch_size,
        "max_seq_len": shape.max_seq_len,
        "use_liger": shape.use_liger,
        "verbose": 0,
    }
    if shape.algorithm == "lora":
        extra = {"lora_r": shape.lora_r}
    elif shape.algorithm == "osft":
        extra = {"max_tokens_per_gpu": shape.max_tokens_per_gpu, "unfreeze_rank_ratio": shape.unfreeze_rank_ratio}
    else:
        extra = {"max_tokens_per_gpu": shape.max_tokens_per_gpu}
    try:
        low, expected, high = estimator_class(**common, **extra).estimate()
    except (OSError, ValueError) as error:
        raise EstimateUnavailable(f"{config_dir}/config.json: {error}") from None
    return Estimate(int(low), int(expected), int(high))


def node_gpu_memory(nodes: list[Mapping]) -> tuple[int, str] | None:
    """The smallest GPU memory (bytes) the nodes advertise and its product, from GPU Feature Discovery's labels."""
    found = []
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        mib = str(labels.get(GPU_MEMORY_LABEL, ""))
        if mib.isdigit():
            found.append((int(mib) * 1024**2, str(labels.get(GPU_PRODUCT_LABEL) or "an unnamed GPU")))
    return min(found) if found else None


def _gib(value: int) -> str:
    return f"{value / GIB:.1f}" if value >= GIB else f"{value / GIB:.2f}"


def verdict(shape: RunShape, result: Estimate, gpu_bytes: int, product: str) -> tuple[str, str, str]:
    """``(level, what, remedy)``: OK when the upper bound fits, WARN when part of the range does, else FAIL."""
    method = ("Q" if shape.quantization else "") + shape.algorithm.upper()
    what = (
        f"{method} of {shape.base_model} on {shape.num_gpus} GPU(s): estimated "
        f"{_gib(result.expected)} GiB per GPU ({_gib(result.low)}–{_gib(result.high)}) vs "
        f"{_gib(gpu_bytes)} GiB on {product}"
    )
    if result.high <= gpu_bytes:
        return "OK", what, ""
    remedies = ["more GPUs (training_gpus_per_node / training_num_nodes)"]
    if shape.algorithm in ("sft", "osft"):
        remedies.append(f"a lower max_tokens_per_gpu (now {shape.max_tokens_per_gpu})")
    if shape.algorithm == "osft":
        remedies.append(f"a lower unfreeze_rank_ratio (now {shape.unfreeze_rank_ratio})")
    if shape.algorithm == "lora":
        remedies.append(f"a lower effective_batch_size or max_seq_len (now {shape.effective_batch_size}, "
                        f"{shape.max_seq_len})")  # fmt: skip
    else:
        remedies.append("LoRA")
    return ("FAIL" if result.low > gpu_bytes else "WARN"), what, "try " + ", ".join(remedies)


def presubmit_line(shape: RunShape) -> str:
    """The training step's one line before it submits a job: the estimate, or why it is skipped."""
    try:
        result = estimate(shape, config_directory(shape.base_model))
    except EstimateUnavailable as error:
        return f"GPU memory estimate skipped: {error}"
    except Exception as error:  # noqa: BLE001 - an estimate must never stop a run
        return f"GPU memory estimate skipped: {type(error).__name__}: {error}"
    return (
        f"GPU memory: estimated {_gib(result.expected)} GiB per GPU ({_gib(result.low)}–{_gib(result.high)}); "
        f"the nodes' GPU memory is not known here (`kfp-finetune doctor` compares it with their {GPU_MEMORY_LABEL})"
    )


def run_shape(config: Any, gpus_per_node: int, num_nodes: int, model_path: str | None = None) -> RunShape:
    """The shape of a ``train_model`` run (its ``TrainingConfig`` and GPUs; ``model_path``: a staged base model)."""
    hp = config.hyperparameters()
    return RunShape(
        algorithm=config.algorithm,
        base_model=model_path or config.base_model,
        num_gpus=max(gpus_per_node, 1) * max(num_nodes, 1),
        max_tokens_per_gpu=int(hp["max_tokens_per_gpu"]),
        max_seq_len=int(hp["max_seq_len"]),
        effective_batch_size=int(hp["effective_batch_size"]),
        unfreeze_rank_ratio=float(hp["unfreeze_rank_ratio"]),
        lora_r=int(hp["lora_r"]),
        use_liger=bool(hp["use_liger"]),
        quantization="4bit" if hp["lora_load_in_4bit"] else "8bit" if hp["lora_load_in_8bit"] else "",
    )
