"""``lm_eval``'s typed request: the component's arguments (input artifacts as paths), and the builder of it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components._common.arguments import artifact_path, require_arguments

#: The input artifacts, by argument name: the request fields their path and (for some) metadata go to.
ARTIFACT_FIELDS = {
    "model": ("model_path", "model_metadata"),
    "eval_dataset": ("eval_dataset_path", "eval_dataset_metadata"),
    "baseline_results": ("baseline_results_path", ""),
    "custom_tasks": ("custom_tasks_path", ""),
}
#: The output artifacts: written by the wrapper from the outcome, not part of the request.
OUTPUTS = ("metrics", "results", "report")


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


def lm_eval_request(arguments: Mapping[str, Any]) -> LmEvalRequest:
    """``lm_eval``'s arguments (the wrapper's ``dict(locals())``) as its request.

    Parameters keep their names; each input artifact becomes its path (``""`` when absent) and, for the model and the
    eval dataset, its metadata (``{}`` when absent).

    Raises:
        TypeError: A name is missing or unknown, or an input artifact is not artifact-like.
    """
    derived = {field for fields in ARTIFACT_FIELDS.values() for field in fields if field}
    parameters = [field.name for field in dataclasses.fields(LmEvalRequest) if field.name not in derived]
    require_arguments("lm_eval", arguments, [*parameters, *ARTIFACT_FIELDS, *OUTPUTS])
    values = {name: arguments[name] for name in parameters}
    for name, (path_field, metadata_field) in ARTIFACT_FIELDS.items():
        artifact = arguments[name]
        values[path_field] = artifact_path("lm_eval", name, artifact)
        if metadata_field:
            values[metadata_field] = dict(artifact.metadata) if artifact is not None else {}
    return LmEvalRequest(**values)
