"""Check 6: the run's GPU memory per GPU (Training Hub's estimator) against what the GPU nodes advertise.

The estimate (:mod:`components.training.memory_estimate`) uses the run's algorithm, GPUs, ``max_tokens_per_gpu``,
``max_seq_len``, ``effective_batch_size``, ``unfreeze_rank_ratio``, ``lora_r`` and QLoRA's 4-/8-bit loading
(Training Hub's ``QLoRAEstimator``), and the base model's ``config.json`` only. The nodes' GPU memory comes from GPU
Feature Discovery's ``nvidia.com/gpu.memory`` label (MiB); the smallest GPU among the labelled nodes is the one
compared (a pod may land on any of them).
"""

from __future__ import annotations

from components.training import memory_estimate
from pipelines.doctor import facts as keys
from pipelines.doctor.cluster import ApiUnavailable, Cluster, Forbidden
from pipelines.doctor.facts import RunValues
from pipelines.doctor.gpus import GPU_PRESENT_LABEL
from pipelines.doctor.report import Check, ok, warn

ALGORITHM = ("train", "training_algorithm")
MAX_TOKENS_PER_GPU = ("train", "training_max_tokens_per_gpu")
MAX_SEQ_LEN = ("train", "training_max_seq_len")
EFFECTIVE_BATCH_SIZE = ("train", "training_effective_batch_size")
UNFREEZE_RANK_RATIO = ("train", "training_unfreeze_rank_ratio")
LORA_R = ("train", "training_lora_r")
USE_LIGER = ("train", "training_use_liger")
LOAD_IN_4BIT = ("train", "training_lora_load_in_4bit")
LOAD_IN_8BIT = ("train", "training_lora_load_in_8bit")
_ESTIMATE_NEEDS = "the estimate needs training-hub installed and the model's config.json (a local directory or HF id)"


def run_shape(values: RunValues) -> memory_estimate.RunShape | None:
    """The run as the estimator needs it (None: no GPUs asked for, or no algorithm in the pipeline)."""
    algorithm = values.get(ALGORITHM)
    gpus = values.integer(keys.GPUS_PER_NODE) * max(values.integer(keys.NUM_NODES), 1)
    if algorithm not in ("sft", "osft", "lora") or gpus <= 0:
        return None
    return memory_estimate.RunShape(
        algorithm=str(algorithm),
        base_model=str(values.get(keys.BASE_MODEL) or ""),
        num_gpus=gpus,
        max_tokens_per_gpu=values.integer(MAX_TOKENS_PER_GPU),
        max_seq_len=values.integer(MAX_SEQ_LEN),
        effective_batch_size=values.integer(EFFECTIVE_BATCH_SIZE),
        unfreeze_rank_ratio=float(values.get(UNFREEZE_RANK_RATIO)),
        lora_r=values.integer(LORA_R),
        use_liger=bool(values.get(USE_LIGER)),
        quantization="4bit" if values.get(LOAD_IN_4BIT) else "8bit" if values.get(LOAD_IN_8BIT) else "",
    )


def check_gpu_memory(cluster: Cluster, values: RunValues) -> list[Check]:
    """Check 6: one line, ``estimated X GiB per GPU (low–high) vs Y GiB on <product>``, OK / WARN / FAIL."""
    shape = run_shape(values)
    if shape is None:
        return []
    try:
        nodes = cluster.nodes(GPU_PRESENT_LABEL)
    except (Forbidden, ApiUnavailable) as error:
        return [warn("gpus", f"GPU memory not checked: cannot list nodes ({error})", "ask an admin for the GPU type")]
    if not nodes:  # no GPU node at all: check 5 already says so
        return []
    advertised = memory_estimate.node_gpu_memory(nodes)
    if advertised is None:
        what = f"GPU memory not checked: no node carries the {memory_estimate.GPU_MEMORY_LABEL} label"
        return [warn("gpus", what, "GPU Feature Discovery (NVIDIA GPU Operator) labels nodes with it")]
    try:
        directory = memory_estimate.config_directory(shape.base_model)
        result = memory_estimate.estimate(shape, directory)
    except memory_estimate.EstimateUnavailable as error:  # not a finding about the cluster: a note, not a WARN
        return [ok("gpus", f"GPU memory not estimated here: {error}", _ESTIMATE_NEEDS)]
    level, what, remedy = memory_estimate.verdict(shape, result, *advertised)
    return [Check(level, "gpus", what, remedy)]
