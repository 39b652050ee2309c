"""The ``osft-minimal`` pipeline."""
