"""The trainer of the ``local`` launcher and ``training_backend="transformers"``: ``transformers.Trainer``.

Run in-process by the ``local`` launcher, and under ``torchrun`` in a TrainJob's pods (``pod_launch``, ``pod_worker``).
Nothing here imports ``kfp`` or the cluster client.
"""
