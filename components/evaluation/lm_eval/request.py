"""``lm_eval``'s typed request: the component's arguments (input artifacts as paths), built only in ``component.py``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LmEvalRequest:
    """``lm_eval``'s arguments as the component received them (input artifacts as paths); no defaults here.

    Attributes:
        model_path: ``model.path`` (full model or PEFT adapter directory; "" = none).
        model_metadata: ``model.metadata`` (``base_model`` locates an adapter's base).
        task_names: lm-eval task, group or tag names (built-in or from ``custom_tasks_path``).
        eval_dataset_path: Held-out chat JSONL ("" = none); adds the held-out generation and perplexity tasks.
        eval_dataset_metadata: The eval dataset artifact's metadata (its ``dataset_uri`` is recorded).
        baseline_results_path: Results JSON of a baseline run ("" = none); the report shows deltas against it.
        model_source: Local path or Hub id evaluated instead of ``model`` ("" = use ``model``).
        batch_size: ``auto``, ``auto:N`` or a positive integer.
        limit: Documents per task; -1 = all.
        num_fewshot: Few-shot examples; -1 = each task's default.
        gen_kwargs: Generation settings applied to every generative task (see :func:`normalize_gen_kwargs`).
        model_args: Extra lm-eval model arguments (``dtype``, ``trust_remote_code``, ...).
        apply_chat_template: Render prompts with the model's chat template.
        backend: ``hf`` or ``vllm``.
        seed: Seed of Python, NumPy, torch and the few-shot sampler.
        log_samples: Keep every per-document sample in the results JSON.
        max_samples: Conversations of ``eval_dataset`` used (the first ones); -1 = all.
        max_new_tokens: Most tokens generated per held-out answer.
        custom_tasks_path: Directory of extra lm-eval task YAMLs ("" = none).
        device: Torch device for the ``hf`` backend ("" = ``cuda`` when available, else ``cpu``).
        bootstrap_iters: Bootstrap resamples for standard errors (0 = no stderr).
        allow_empty_eval_dataset: Skip the held-out tasks, rather than fail, when ``eval_dataset`` is empty.
        enabled: False writes "skipped" outputs without evaluating (a pipeline parameter turning the task off).
        skip_unusable_model_source: Write "skipped" outputs, rather than fail, when ``model_source`` cannot be
            evaluated as asked (:func:`~.model_spec.unusable_source_reason`: an ``oci://``/``s3://``/``pvc://`` URI,
            a path this pod lacks, no chat template while ``apply_chat_template``).
    """

    model_path: str
    model_metadata: Mapping[str, Any]
    task_names: Sequence[str]
    eval_dataset_path: str
    eval_dataset_metadata: Mapping[str, Any]
    baseline_results_path: str
    model_source: str
    batch_size: str
    limit: int
    num_fewshot: int
    gen_kwargs: Mapping[str, Any]
    model_args: Mapping[str, Any]
    apply_chat_template: bool
    backend: str
    seed: int
    log_samples: bool
    max_samples: int
    max_new_tokens: int
    custom_tasks_path: str
    device: str
    bootstrap_iters: int
    allow_empty_eval_dataset: bool
    enabled: bool
    skip_unusable_model_source: bool
