"""Runs lm-eval for the ``lm_eval`` component: checks the inputs, builds the tasks, evaluates, writes the outputs."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import partial
from pathlib import Path
from typing import Any

from components._common.arguments import artifact_path, require_arguments
from components._common.base_model import BaseModelError, stage_base_model
from components._common.dataset_metadata import read_dataset_metadata
from components._common.files import write_text_atomically
from components._common.masking import mask_data, masked
from components._common.model_location import resolve_model_dir
from components.evaluation.lm_eval.comparison import compare_with_baseline
from components.evaluation.lm_eval.custom_task import (
    HELDOUT_TASKS,
    count_conversations,
    is_empty_dataset,
    stage_custom_tasks,
    write_heldout_tasks,
)
from components.evaluation.lm_eval.devices import resolve_device
from components.evaluation.lm_eval.model_spec import ModelSpec, load_tokenizer, resolve_model, unusable_source_reason
from components.evaluation.lm_eval.options import check_options
from components.evaluation.lm_eval.remote_evaluation import LOCAL_BACKEND, check_backend
from components.evaluation.lm_eval.report import (
    kfp_metrics,
    load_baseline,
    render_report,
    render_skipped_report,
)
from components.evaluation.lm_eval.results import metric_rows
from components.evaluation.lm_eval.task_index import build_task_manager, check_task_names, stage_task_dirs

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
    pvc_path: str
    eval_backend: str
    hardware_profile: str
    evalhub_url: str
    eval_timeout_seconds: int
    eval_cleanup_policy: str


def lm_eval_request(arguments: Mapping[str, Any]) -> LmEvalRequest:
    """``lm_eval``'s arguments (the wrapper's ``dict(locals())``) as its request.

    Parameters keep their names; each input artifact becomes its path (``""`` when absent) and, for the model and the
    eval dataset, its metadata (``{}`` when absent).

    Raises:
        TypeError: A name is missing or unknown, or an input artifact is not artifact-like.
    """
    derived = {name for names in ARTIFACT_FIELDS.values() for name in names if name}
    parameters = [item.name for item in fields(LmEvalRequest) if item.name not in derived]
    require_arguments("lm_eval", arguments, [*parameters, *ARTIFACT_FIELDS, *OUTPUTS])
    values = {name: arguments[name] for name in parameters}
    for name, (path_field, metadata_field) in ARTIFACT_FIELDS.items():
        artifact = arguments[name]
        values[path_field] = artifact_path("lm_eval", name, artifact)
        if metadata_field:
            values[metadata_field] = dict(artifact.metadata) if artifact is not None else {}
    return LmEvalRequest(**values)


class BenchmarkDataError(RuntimeError):
    """A benchmark's dataset cannot be reached (offline cluster, not in the Hugging Face cache)."""


@dataclass(frozen=True)
class LmEvalResult:
    """What the component publishes: KFP metrics, the ``results`` artifact's metadata and the results written."""

    metrics: dict[str, float]
    results_metadata: dict[str, Any]
    results: dict[str, Any] = field(repr=False)


def _log(message: str) -> None:
    print(f"[lm_eval] {message}", flush=True)


def check_backend_available(backend: str) -> None:
    """Fails early (``ValueError``) when the ``vllm`` backend is asked for in an image without vLLM."""
    import importlib.util

    if backend == "vllm" and importlib.util.find_spec("vllm") is None:
        raise ValueError(
            "backend 'vllm' needs the vllm package, which this image lacks: build an image from the Containerfile "
            "with vLLM added and compile with --eval-image <it>, or use backend 'hf'"
        )


def ensure_writable_hf_cache() -> None:
    """Points ``HF_HOME`` at a temporary directory when no cache is configured and ``~/.cache`` is read-only.

    OpenShift runs pods under a random UID whose home is often not writable; ``datasets`` needs a cache to load the
    held-out split. A configured ``HF_HOME``/``HF_DATASETS_CACHE`` (e.g. a pre-populated cache on a PVC) is kept.
    """
    if os.environ.get("HF_HOME") or os.environ.get("HF_DATASETS_CACHE"):
        return
    cache = Path(os.path.expanduser("~/.cache"))
    probe = cache if cache.exists() else cache.parent
    if not os.access(probe, os.W_OK):
        os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="hf-home-")
        _log(f"{probe} is not writable: HF_HOME set to {os.environ['HF_HOME']}")


def _results_json(results: Mapping[str, Any]) -> str:
    """Serialises lm-eval results the way lm-eval does (numpy scalars as numbers, anything else as text)."""
    from lm_eval.utils import handle_non_serializable

    return json.dumps(results, indent=2, default=handle_non_serializable, ensure_ascii=False) + "\n"


def _evaluate(spec: ModelSpec, task_names: Sequence[str], manager: Any, options: Mapping[str, Any]) -> dict:
    """Calls ``lm_eval.simple_evaluate``; an unreachable benchmark dataset becomes :class:`BenchmarkDataError`."""
    import lm_eval

    passed = ("num_fewshot", "batch_size", "device", "limit", "bootstrap_iters", "apply_chat_template", "gen_kwargs")
    seeds = dict.fromkeys(["random_seed", "numpy_random_seed", "torch_random_seed", "fewshot_random_seed"])
    try:
        results = lm_eval.simple_evaluate(
            model=spec.lm_eval_model,
            model_args=dict(spec.model_args),
            tasks=list(task_names),
            task_manager=manager,
            log_samples=True,
            **{name: options[name] for name in passed},
            **dict.fromkeys(seeds, options["seed"]),
        )
    except ConnectionError as error:
        raise BenchmarkDataError(
            f"{error}. A benchmark dataset could not be downloaded. On a disconnected cluster, pre-populate the "
            "Hugging Face cache on a PVC, mount it and set HF_HOME (or HF_DATASETS_CACHE) to it with "
            "HF_DATASETS_OFFLINE=1 (see the component README), or evaluate a custom task from local files"
        ) from error
    return dict(results)


def _write_heldout(spec: ModelSpec, dataset_path: Path, task_dir: Path, options: Mapping[str, Any]) -> tuple[int, int]:
    """Writes the held-out tasks with the model's tokenizer; returns the conversations evaluated and available.

    Tokens are counted the way lm-eval's ``loglikelihood`` splits a (context, continuation) pair: the context's
    trailing whitespace moves to the continuation, and the tokens of the whole text past the context's are scored.
    With the chat template, the prompt is rendered with it and the generation prompt, as lm-eval does.

    Raises:
        ValueError: ``apply_chat_template`` is true and the tokenizer has no chat template.
    """
    tokenizer = load_tokenizer(spec)

    def count(context: str, continuation: str) -> int:
        whole = tokenizer(context + continuation, add_special_tokens=False)["input_ids"]
        return len(whole) - len(tokenizer(context.rstrip(), add_special_tokens=False)["input_ids"])

    render = None
    if options["apply_chat_template"]:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                f"apply_chat_template is true but the tokenizer of {spec.tokenizer_source} has no chat template; "
                "set apply_chat_template to false to evaluate a base model with plain-text prompts"
            )
        render = partial(tokenizer.apply_chat_template, tokenize=False, add_generation_prompt=True)
    rows = write_heldout_tasks(dataset_path, task_dir, count, render, options["max_samples"], options["max_new_tokens"])
    available = count_conversations(dataset_path)
    _log(f"held-out split: {_heldout_count(rows, available, options)} from {dataset_path}")
    return rows, available


def _heldout_count(evaluated: int, available: int, options: Mapping[str, Any]) -> str:
    """``40 of 40 conversations``, or ``20 of 40 conversations (max_samples=20)`` when the split was cut."""
    cut = f" (max_samples={options['max_samples']})" if evaluated < available else ""
    return f"{evaluated} of {available} conversations{cut}"


def _report_settings(
    spec: ModelSpec, backend: str, names: Sequence[str], heldout: tuple[int, int], options: Mapping[str, Any]
) -> dict[str, Any]:
    """The run settings shown at the top of the report."""
    return {
        "Model": spec.source,
        **({"Base model": spec.base_model} if spec.is_adapter else {}),
        "Backend": backend,
        "Chat template": "applied" if options["apply_chat_template"] else "not applied",
        "Tasks": ", ".join(names) or "(none)",
        "Held-out conversations": _heldout_count(*heldout, options) if heldout[1] else "(none)",
        "Limit per task": "all" if options["limit"] is None else options["limit"],
        "Few-shot": "task default" if options["num_fewshot"] is None else options["num_fewshot"],
        "Generation settings": json.dumps(options["gen_kwargs"] or {}),
        "Seed": options["seed"],
    }


def _skipped(results_path: str, report_path: str, source: str, reason: str) -> LmEvalResult:
    """Writes the outputs of an evaluation that did not run: results with a ``skipped`` entry, a one-line report."""
    _log(f"skipped: {reason}")
    results = {"results": {}, "configs": {}, "versions": {}, "skipped": reason}
    write_text_atomically(Path(results_path), json.dumps(results, indent=2) + "\n")
    write_text_atomically(Path(report_path), render_skipped_report(reason))
    return LmEvalResult(metrics={}, results_metadata={"model": source, "skipped": reason}, results=results)


def located_model_source(request: LmEvalRequest) -> str:
    """``model_source``, or its copy on the workspace: a Hub id, ``s3://`` or ``oci://`` downloaded there once per run.

    Without ``pvc_path`` (no workspace) ``model_source`` is returned as given.

    Raises:
        BaseModelError: The download failed.
    """
    if not request.model_source or not request.pvc_path.strip():
        return request.model_source
    staged = stage_base_model(request.model_source, request.pvc_path, os.environ, parameter="model_source", log=_log)
    return str(staged.path) if staged is not None else request.model_source


@masked
def run_lm_eval(request: LmEvalRequest, results_path: str, report_path: str) -> LmEvalResult:
    """Evaluates a model with lm-eval and writes the results JSON and the HTML report.

    Raises:
        ValueError: A parameter is invalid (the message names it), the model directory misses files, the held-out
            dataset is empty or malformed, or a task name is unknown.
        BenchmarkDataError: A benchmark dataset cannot be reached.
    """
    options = check_options(request.batch_size, request.limit, request.num_fewshot, request.gen_kwargs,
                            request.apply_chat_template, request.seed, request.max_samples, request.max_new_tokens,
                            request.bootstrap_iters)  # fmt: skip
    if not request.enabled:
        source = request.model_source or request.model_path
        return _skipped(results_path, report_path, source, "turned off (enabled is false)")
    try:
        model_source = located_model_source(request)
    except BaseModelError as error:
        if not request.skip_unusable_model_source:
            raise
        return _skipped(results_path, report_path, request.model_source, f"model_source not staged: {error}")
    if request.skip_unusable_model_source:
        template = options["apply_chat_template"]
        unusable = unusable_source_reason(model_source, request.backend, request.model_args, template)
        if unusable:
            return _skipped(results_path, report_path, request.model_source, f"model_source {unusable}")
    check_backend(request.eval_backend, request.custom_tasks_path, request.evalhub_url, request.pvc_path)
    model_dir = str(resolve_model_dir(request.model_path)) if request.model_path and not model_source else ""
    spec = resolve_model(model_dir, request.model_metadata, model_source, request.backend, request.model_args)
    if request.eval_backend == LOCAL_BACKEND:
        check_backend_available(request.backend)
    baseline = load_baseline(Path(request.baseline_results_path)) if request.baseline_results_path else None
    heldout = bool(request.eval_dataset_path)
    if heldout and request.allow_empty_eval_dataset and is_empty_dataset(Path(request.eval_dataset_path)):
        _log(f"eval_dataset {request.eval_dataset_path} is empty: held-out tasks skipped (allow_empty_eval_dataset)")
        heldout = False
    names = check_task_names(request.task_names, heldout)
    if not names and not request.eval_dataset_path:
        raise ValueError("nothing to evaluate: task_names is empty and no eval_dataset was given")
    options["device"] = resolve_device(request.device, request.backend)
    ensure_writable_hf_cache()
    _log(f"model {spec.source}" + (f" (PEFT adapter on {spec.base_model})" if spec.is_adapter else ""))

    with tempfile.TemporaryDirectory(prefix="lm-eval-tasks-") as staging:
        names, include_paths = stage_task_dirs(names, Path(staging))
        if request.custom_tasks_path:
            include_paths.insert(0, stage_custom_tasks(Path(request.custom_tasks_path), Path(staging) / "custom"))
        heldout_rows = heldout_available = 0
        if heldout:
            include_paths.append(Path(staging) / "heldout")
            heldout_rows, heldout_available = _write_heldout(
                spec, Path(request.eval_dataset_path), include_paths[-1], options
            )
            names = list(dict.fromkeys([*names, *HELDOUT_TASKS]))
        lineage: dict[str, Any] = {}
        if names and (request.eval_backend != LOCAL_BACKEND or request.hardware_profile):
            from components.evaluation.lm_eval.remote_evaluation import evaluate_on_backend

            staged = Path(staging) / "heldout" if heldout else None
            results, lineage = evaluate_on_backend(request, spec, names, staged, options, _log)  # type: ignore[assignment]
        if names and request.eval_backend == LOCAL_BACKEND:
            _log(f"evaluating {', '.join(names)}")
            results = _evaluate(spec, names, build_task_manager(names, include_paths), options)
        elif not names:
            results = {"results": {}, "configs": {}, "versions": {}}

    written = results if request.log_samples else {key: value for key, value in results.items() if key != "samples"}
    write_text_atomically(Path(results_path), _results_json(written))
    settings = _report_settings(spec, request.backend, names, (heldout_rows, heldout_available), options)
    write_text_atomically(Path(report_path), render_report(results, settings, baseline, names))
    compared, compared_to = compare_with_baseline(results, baseline, names)
    if baseline is not None:
        skipped = compared_to.get("baseline_skipped")
        _log(f"base model not evaluated: {skipped}" if skipped else f"base -> fine-tuned: {compared_to['verdict']}")
    metrics = {**kfp_metrics(metric_rows(results)), **compared}
    for name, value in metrics.items():
        _log(f"{name} = {value:.6g}")
    metadata = {
        "model": spec.source,
        "base_model": spec.base_model,
        "backend": request.backend,
        "tasks": names,
        "apply_chat_template": options["apply_chat_template"],
        "heldout_rows": heldout_rows,
        "heldout_rows_available": heldout_available,
        "lm_eval_version": str(results.get("lm_eval_version", "")),
        **compared_to,
        **lineage,
    }
    described = read_dataset_metadata(request.eval_dataset_metadata, "lm_eval input eval_dataset")
    if described is not None:
        metadata["dataset_uri"] = described.dataset_uri
    return LmEvalResult(metrics=metrics, results_metadata=mask_data(metadata, patterns=False), results=written)
