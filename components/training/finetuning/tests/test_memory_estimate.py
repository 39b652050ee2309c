"""Training Hub's GPU memory estimator fed from ``config.json`` alone; the training step's line before submitting."""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import pytest

from components.training import memory_estimate as memory

A100 = {"metadata": {"labels": {memory.GPU_MEMORY_LABEL: "81920", memory.GPU_PRODUCT_LABEL: "NVIDIA-A100-SXM4-80GB"}}}
T4 = {"metadata": {"labels": {memory.GPU_MEMORY_LABEL: "300", memory.GPU_PRODUCT_LABEL: "Tesla-T4"}}}


@pytest.fixture
def config_only(tiny_model_dir, tmp_path) -> Path:
    """The tiny model's config.json and nothing else: no weights to read."""
    shutil.copyfile(tiny_model_dir / "config.json", tmp_path / "config.json")
    return tmp_path


def _shape(algorithm: str, model: Path | str, **changes) -> memory.RunShape:
    values = {"num_gpus": 1, "max_tokens_per_gpu": 64000, "max_seq_len": 8192, "effective_batch_size": 128}
    values |= {"unfreeze_rank_ratio": 0.25, "lora_r": 16}
    return memory.RunShape(algorithm=algorithm, base_model=str(model), **{**values, **changes})


def test_each_algorithm_is_estimated_from_the_config_alone_and_nothing_is_written(config_only):
    from training_hub.profiling import memory_estimator

    table = Path(memory_estimator.__file__).with_name("model_storage.csv")
    before = hashlib.sha256(table.read_bytes()).hexdigest() if table.exists() else None
    assert memory.config_directory(str(config_only)) == config_only
    results = {}
    for algorithm in ("sft", "osft", "lora"):
        results[algorithm] = memory.estimate(_shape(algorithm, config_only), config_only)
        assert 0 < results[algorithm].low <= results[algorithm].expected <= results[algorithm].high
    after = hashlib.sha256(table.read_bytes()).hexdigest() if table.exists() else None
    assert after == before  # the estimator's table inside the installed package is neither created nor changed
    # OSFT's unfrozen share and the GPU count move the estimate the way Training Hub models them.
    smaller = memory.estimate(_shape("osft", config_only, unfreeze_rank_ratio=0.05), config_only)
    assert smaller.expected < results["osft"].expected
    sharded = memory.estimate(_shape("sft", config_only, num_gpus=8, max_tokens_per_gpu=1000), config_only)
    assert sharded.expected < results["sft"].expected


def test_quantised_loading_shrinks_the_lora_estimate_and_grpo_has_none(config_only):
    """QLoRA keeps the frozen weights in 4 (Training Hub's QLoRAEstimator) or 8 bits: less memory than 16-bit LoRA."""
    small = {"effective_batch_size": 1, "max_seq_len": 16}
    full, eight, four = (
        memory.estimate(_shape("lora", config_only, quantization=bits, **small), config_only)
        for bits in ("", "8bit", "4bit")
    )
    assert four.expected < eight.expected < full.expected
    assert memory.presubmit_line(_shape("grpo", config_only)).startswith(
        "GPU memory estimate skipped: Training Hub has no memory estimator for grpo"
    )


def _verdict(shape: memory.RunShape, nodes: list) -> str:
    level, what, remedy = memory.verdict(
        shape, memory.estimate(shape, Path(shape.base_model)), *memory.node_gpu_memory(nodes)
    )
    return f"{level}: {what} — {remedy}"


def test_the_verdict_compares_with_the_smallest_labelled_gpu(config_only):
    line = _verdict(_shape("osft", config_only), [A100, {"metadata": {"labels": {}}}])
    assert line.startswith("OK: OSFT of ") and "vs 80.0 GiB on NVIDIA-A100-SXM4-80GB" in line
    line = _verdict(_shape("osft", config_only), [A100, T4])
    assert line.startswith("WARN: ") and "vs 0.29 GiB on Tesla-T4" in line
    assert "a lower unfreeze_rank_ratio (now 0.25)" in line and "LoRA" in line
    lora = _verdict(_shape("lora", config_only, max_seq_len=100000), [T4])
    assert lora.startswith("FAIL: ") and "a lower effective_batch_size or max_seq_len" in lora
    unknown = memory.presubmit_line(_shape("sft", config_only))
    assert "GiB per GPU" in unknown and "not known here" in unknown


def test_without_training_hub_the_line_is_a_skip_note(config_only, monkeypatch):
    monkeypatch.setitem(sys.modules, "training_hub.profiling.memory_estimator", None)
    monkeypatch.setitem(sys.modules, "training_hub.profiling", None)
    line = memory.presubmit_line(_shape("sft", config_only))
    assert line.startswith("GPU memory estimate skipped: Training Hub's memory estimator is not installed here")
    assert memory.presubmit_line(_shape("sft", "pvc://models/x")).startswith(
        "GPU memory estimate skipped: base_model='pvc://models/x': no config.json"
    )
