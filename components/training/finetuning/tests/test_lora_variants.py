"""LoRA variants: DoRA, rsLoRA and the init reach peft in the local trainer; QLoRA without CUDA is one line; the
Training Hub call carries them as ``lora_sft``'s keywords (training-hub 0.11.2 reads each of them)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from components.training.finetuning.contract import TrainingConfigError
from components.training.finetuning.hf_trainer import training
from components.training.finetuning.hf_trainer.data import LocalTrainingError
from components.training.finetuning.local import trainer as local_trainer
from components.training.finetuning.pod import entrypoint, hub_compat
from tests.harness.requests import training_config

FAST = {"effective_batch_size": 8, "learning_rate": 1e-2, "max_seq_len": 256, "max_tokens_per_gpu": 1024}
FAST |= {"lr_scheduler": "constant", "max_steps": 3, "num_epochs": 1, "gradient_checkpointing": False}


@pytest.mark.slow
def test_dora_and_rslora_reach_peft_and_train_the_magnitudes(tiny_model_dir, demo_dataset_path, tmp_path):
    torch.set_num_threads(1)
    config = training_config(
        base_model=str(tiny_model_dir), algorithm="lora", lora_r=4, lora_alpha=8, lora_use_dora=True,
        lora_use_rslora=True, lora_init_weights="gaussian", **FAST,
    )  # fmt: skip
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir), training.lora_config(config))
    peft_config = model.peft_config["default"]
    assert (peft_config.use_dora, peft_config.use_rslora, peft_config.init_lora_weights) == (True, True, "gaussian")
    q_proj = model.base_model.model.model.layers[0].self_attn.q_proj
    assert q_proj.scaling["default"] == pytest.approx(8 / math.sqrt(4))  # rsLoRA: alpha / sqrt(r), not alpha / r
    magnitudes = {name: p.detach().clone() for name, p in model.named_parameters() if "lora_magnitude_vector" in name}
    assert len(magnitudes) == 14 and all(p.requires_grad for n, p in model.named_parameters() if n in magnitudes)

    result = local_trainer.train_locally(config, demo_dataset_path, tmp_path / "out", log=lambda line: None)
    saved = json.loads((result.adapter_dir / "adapter_config.json").read_text())
    assert (saved["use_dora"], saved["use_rslora"], saved["init_lora_weights"]) == (True, True, "gaussian")
    from safetensors.torch import load_file

    adapter = load_file(result.adapter_dir / "adapter_model.safetensors")
    trained = {name: value for name, value in adapter.items() if "lora_magnitude_vector" in name}
    assert len(trained) == 14
    # DoRA's per-row magnitudes moved with training (they start as the base weights' row norms).
    q_name = next(name for name in trained if "layers.0.self_attn.q_proj" in name)
    start = next(value for name, value in magnitudes.items() if "layers.0.self_attn.q_proj" in name)
    assert not torch.allclose(trained[q_name], start)


def test_plain_lora_keeps_peft_defaults(tiny_model_dir):
    config = training_config(base_model=str(tiny_model_dir), algorithm="lora", lora_r=4, lora_alpha=8)
    lora = training.lora_config(config)
    assert (lora.use_dora, lora.use_rslora, lora.init_lora_weights) == (False, False, True)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the one line is for a machine without CUDA")
def test_qlora_without_cuda_is_one_line(tiny_model_dir, tmp_path):
    config = training_config(base_model=str(tiny_model_dir), algorithm="lora", lora_load_in_4bit=True)
    with pytest.raises(LocalTrainingError) as raised:
        local_trainer.train_locally(config, tmp_path / "train.jsonl", tmp_path / "out")
    message = str(raised.value)
    assert "\n" not in message and message.startswith("train_model parameter training_lora_load_in_4bit=True: ")
    assert "needs a CUDA GPU" in message


def test_qlora_loads_in_4_or_8_bits_not_both():
    with pytest.raises(TrainingConfigError, match=r"training_lora_load_in_8bit=True: QLoRA loads the base model in"):
        training_config(algorithm="lora", lora_load_in_4bit=True, lora_load_in_8bit=True)
    with pytest.raises(TrainingConfigError, match=r"training_lora_init_weights='loftq': must be one of"):
        training_config(algorithm="lora", lora_init_weights="loftq")


def test_training_hub_gets_the_variants_as_lora_sft_keywords_it_reads():
    import training_hub

    config = training_config(
        algorithm="lora", lora_use_dora=True, lora_use_rslora=True, lora_init_weights="pissa", lora_load_in_4bit=True,
        lora_bnb_4bit_quant_type="fp4", lora_bnb_4bit_compute_dtype="float16", lora_bnb_4bit_use_double_quant=False,
    )  # fmt: skip
    variants = entrypoint.lora_variant_kwargs(config.training_settings())
    assert variants == {
        "use_dora": True,
        "use_rslora": True,
        "init_lora_weights": "pissa",
        "load_in_4bit": True,
        "bnb_4bit_quant_type": "fp4",
        "bnb_4bit_compute_dtype": "float16",
        "bnb_4bit_use_double_quant": False,
    }
    taken = hub_compat.keywords_taken("lora_sft", training_hub.lora_sft)
    assert set(variants) <= taken  # each one a named parameter or a key UnslothLoRABackend reads
    assert entrypoint.lora_variant_kwargs(training_config(algorithm="lora").training_settings()) == {}
    eight = training_config(algorithm="lora", lora_load_in_8bit=True, lora_init_weights="false")
    expected = {"init_lora_weights": False, "load_in_8bit": True}
    assert entrypoint.lora_variant_kwargs(eight.training_settings()) == expected


def test_a_release_without_the_variants_refuses_them_in_one_line():
    """An older lora_sft that reads none of them: a set variant is a training setting, so the pod ends in one line."""

    def lora_sft(model_path, data_path, ckpt_output_dir, lora_r=16):  # a release's signature without **kwargs
        return None

    with pytest.raises(hub_compat.TrainingHubUnsupported, match=r"lora_sft does not take use_dora=True"):
        hub_compat.select_keywords("lora_sft", lora_sft, {"model_path": "m", "use_dora": True}, "0.5.0")
