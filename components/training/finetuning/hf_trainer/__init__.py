"""The trainer of the ``local`` launcher and ``training_backend="transformers"``: ``transformers.Trainer``.

``training`` builds the Trainer from the config (SFT, LoRA with peft, OSFT with mini-trainer's model: ``osft``) and
saves the final model, ``callbacks`` keeps the project's contracts (metrics records, checkpoints put in place whole,
the SIGTERM stop), ``data`` tokenizes with assistant-only labels and ``preemption`` holds the SIGTERM flag and the
checkpoint writer. The ``local`` launcher runs it in its own process; a TrainJob's pods run it under ``torchrun``
through ``pod_launch`` (the pod command) and ``pod_worker`` (each rank), staged onto the workspace PVC by
``train_model`` (:mod:`..transformers_backend`). Nothing here imports ``kfp`` or the cluster client.
"""
