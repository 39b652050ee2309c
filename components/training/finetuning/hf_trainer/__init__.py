"""The project's own trainer (``training_backend="transformers"``): SFT, OSFT and LoRA with transformers and peft.

``loop`` is the training loop (one process, or one data-parallel rank), ``data`` the tokenization, ``osft`` the
orthogonal subspace layers, ``preemption`` the SIGTERM-safe checkpoints and ``distributed`` the process group. The
``local`` launcher runs the loop in its own process; a TrainJob's pods run it under ``torchrun`` through
``pod_launch`` (the pod command) and ``pod_worker`` (each rank), staged onto the workspace PVC by ``train_model``
(:mod:`..transformers_backend`). Nothing here imports ``kfp`` or the cluster client.
"""
