"""The ``lora_grpo`` pipeline."""
