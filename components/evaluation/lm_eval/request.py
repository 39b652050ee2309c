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
    """``lm_eval``'s arguments as the component received them; no defaults here.

    One field per parameter, under its name (described once, in ``parameter_docs.py``), but for the input artifacts:
    each is its path (``model_path``, ``eval_dataset_path``, ``baseline_results_path``, ``custom_tasks_path``; ``""``
    = none) and, for the model and the eval dataset, its metadata (``model_metadata``: ``base_model`` locates an
    adapter's base; ``eval_dataset_metadata``: its ``dataset_uri`` is recorded). See :data:`ARTIFACT_FIELDS`.
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
