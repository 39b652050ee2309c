"""The ``sft-minimal`` pipeline."""
