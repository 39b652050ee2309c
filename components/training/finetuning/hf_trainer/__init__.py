"""The trainer of the ``local`` launcher and ``training_backend="transformers"``: ``transformers.Trainer``."""
