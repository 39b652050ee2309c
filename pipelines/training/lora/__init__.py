"""The ``lora`` pipeline."""
