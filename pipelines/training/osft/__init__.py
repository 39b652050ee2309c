"""The ``osft`` pipeline."""
