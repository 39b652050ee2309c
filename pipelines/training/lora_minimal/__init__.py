"""The ``lora-minimal`` pipeline."""
