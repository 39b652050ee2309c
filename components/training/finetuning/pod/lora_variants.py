"""Training Hub ``lora_sft``'s LoRA variants (QLoRA, DoRA, rsLoRA, the init): their keywords, and their defaults.

Standard library only: staged beside :mod:`.entrypoint` into the training pods (:data:`.modules.POD_MODULES`).
"""

from __future__ import annotations

from typing import Any

from components.training.finetuning.contract import TrainingOptions


def lora_variant_kwargs(hp: TrainingOptions) -> dict[str, Any]:
    """``lora_sft``'s QLoRA, DoRA, rsLoRA and init keywords, each only when set (an older release need not take them).

    training-hub 0.11.2's ``UnslothLoRABackend`` reads them from ``**kwargs`` (``algorithms/lora.py``: ``load_in_4bit``,
    ``load_in_8bit``, ``bnb_4bit_*``, ``use_rslora``, ``use_dora``, ``init_lora_weights``).
    """
    kwargs: dict[str, Any] = {}
    if hp.lora_use_dora:
        kwargs["use_dora"] = True
    if hp.lora_use_rslora:
        kwargs["use_rslora"] = True
    if hp.lora_init_weights != "true":
        init = hp.lora_init_weights
        kwargs["init_lora_weights"] = False if init == "false" else init
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
