"""The ``grpo`` pipeline."""
