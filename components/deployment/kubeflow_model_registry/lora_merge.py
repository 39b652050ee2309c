"""Merges a LoRA adapter into its base model (peft's ``merge_and_unload``), for a modelcar served without peft."""

from __future__ import annotations

import json
from pathlib import Path


def merge_adapter(adapter_dir: Path, target: Path) -> None:
    """Loads the adapter's base model (``adapter_config.json``'s ``base_model_name_or_path``), merges, saves.

    ``adapter_dir`` is a peft adapter with its tokenizer, as the training step saves it; the merged model and the
    tokenizer go to ``target`` (``save_pretrained`` layout).

    Raises:
        ValueError: peft/transformers are not installed here, or the base model cannot be loaded from this step.
    """
    base = json.loads((adapter_dir / "adapter_config.json").read_text()).get("base_model_name_or_path") or ""
    try:
        from peft import AutoPeftModelForCausalLM
        from transformers import AutoTokenizer
    except ImportError as error:
        raise ValueError(
            f"modelcar_lora_weights='merged' needs peft and transformers in the registry step to merge the adapter "
            f"({error}); use 'adapter' (served with its base model) or a step image that has them"
        ) from None
    try:
        model = AutoPeftModelForCausalLM.from_pretrained(str(adapter_dir))
    except (OSError, ValueError) as error:
        raise ValueError(
            f"modelcar_lora_weights='merged': cannot load the adapter's base model {base!r} in this step ({error}); "
            "use 'adapter' or give a base model this step can read"
        ) from None
    model.merge_and_unload().save_pretrained(str(target))
    AutoTokenizer.from_pretrained(str(adapter_dir)).save_pretrained(str(target))
