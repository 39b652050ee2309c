"""The ``sft`` pipeline."""
