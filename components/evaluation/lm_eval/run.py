"""Runs lm-eval for the ``lm_eval`` component: checks the inputs, builds the tasks, evaluates, writes the outputs."""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from components._common.base_model import BaseModelError, stage_base_model
from components._common.dataset_metadata import read_dataset_metadata
from components._common.files import write_text_atomically
from components._common.masking import mask_data, masked
from components._common.model_location import resolve_model_dir
from components.evaluation.lm_eval.comparison import compare_with_baseline, metric_rows
from components.evaluation.lm_eval.config import HarnessOptions, LmEvalRequest
from components.evaluation.lm_eval.custom_task import (
    HELDOUT_TASKS,
    build_task_manager,
    check_task_names,
    count_conversations,
    is_empty_dataset,
    stage_custom_tasks,
    stage_task_dirs,
    write_heldout_tasks,
)
from components.evaluation.lm_eval.devices import resolve_device
from components.evaluation.lm_eval.model_spec import ModelSpec, load_tokenizer, resolve_model, unusable_source_reason
from components.evaluation.lm_eval.report import kfp_metrics, load_baseline, render_report

EMPTY_RESULTS = {"results": {}, "configs": {}, "versions": {}}
_SEEDS = ("random_seed", "numpy_random_seed", "torch_random_seed", "fewshot_random_seed")


class BenchmarkDataError(RuntimeError):
    """A benchmark's dataset cannot be reached (offline cluster, not in the Hugging Face cache)."""


@dataclass(frozen=True)
class LmEvalResult:
    """What the component publishes: KFP metrics and the ``results`` artifact's metadata."""

    metrics: dict[str, float]
    results_metadata: dict[str, Any]


def _log(message: str) -> None:
    print(f"[lm_eval] {message}", flush=True)


def check_backend_available(backend: str) -> None:
    """Fails early (``ValueError``) when the ``vllm`` backend is asked for in an image without vLLM."""
    if backend == "vllm" and importlib.util.find_spec("vllm") is None:
        raise ValueError(
            "backend 'vllm' needs the vllm package, which this image lacks: build an image from the Containerfile "
            "with vLLM added and compile with --eval-image <it>, or use backend 'hf'"
        )


def ensure_writable_hf_cache() -> None:
    """Points ``HF_HOME`` at a temporary directory when none is configured and ``~/.cache`` is read-only."""
    if os.environ.get("HF_HOME") or os.environ.get("HF_DATASETS_CACHE"):
        return
    cache = Path(os.path.expanduser("~/.cache"))
    probe = cache if cache.exists() else cache.parent
    if not os.access(probe, os.W_OK):
        os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="hf-home-")
        _log(f"{probe} is not writable: HF_HOME set to {os.environ['HF_HOME']}")


def _evaluate(spec: ModelSpec, names: Sequence[str], manager: Any, harness: HarnessOptions, device: Any) -> dict:
    """Calls ``lm_eval.simple_evaluate``; an unreachable benchmark dataset becomes :class:`BenchmarkDataError`."""
    import lm_eval

    try:
        results = lm_eval.simple_evaluate(
            model=spec.lm_eval_model,
            model_args=dict(spec.model_args),
            tasks=list(names),
            task_manager=manager,
            log_samples=True,
            device=device,
            **harness.lm_eval_arguments(),
            **dict.fromkeys(_SEEDS, harness.seed),
        )
    except ConnectionError as error:
        raise BenchmarkDataError(
            f"{error}. A benchmark dataset could not be downloaded. On a disconnected cluster, pre-populate the "
            "Hugging Face cache on a PVC, mount it and set HF_HOME (or HF_DATASETS_CACHE) to it with "
            "HF_DATASETS_OFFLINE=1 (see the component README), or evaluate a custom task from local files"
        ) from error
    return dict(results)


def _write_heldout(spec: ModelSpec, request: LmEvalRequest, task_dir: Path) -> tuple[int, int]:
    """Writes the held-out tasks with the model's tokenizer; returns the conversations evaluated and available."""
    tokenizer = load_tokenizer(spec)

    def count(context: str, continuation: str) -> int:  # as lm-eval splits them: trailing whitespace moves on
        whole = tokenizer(context + continuation, add_special_tokens=False)["input_ids"]
        return len(whole) - len(tokenizer(context.rstrip(), add_special_tokens=False)["input_ids"])

    render = None
    if request.harness.apply_chat_template:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                f"apply_chat_template is true but the tokenizer of {spec.tokenizer_source} has no chat template; "
                "set apply_chat_template to false to evaluate a base model with plain-text prompts"
            )
        render = partial(tokenizer.apply_chat_template, tokenize=False, add_generation_prompt=True)
    dataset, options = Path(request.eval_dataset.path), request.heldout
    rows = write_heldout_tasks(dataset, task_dir, count, render, options.max_samples, options.max_new_tokens)
    counts = rows, count_conversations(dataset)
    _log(f"held-out split: {_heldout_count(counts, options.max_samples)} from {dataset}")
    return counts


def _heldout_count(counts: tuple[int, int], max_samples: int) -> str:
    """``40 of 40 conversations``, or ``20 of 40 conversations (max_samples=20)`` when the split was cut."""
    evaluated, available = counts
    cut = f" (max_samples={max_samples})" if evaluated < available else ""
    return f"{evaluated} of {available} conversations{cut}"


def _report_settings(
    spec: ModelSpec, request: LmEvalRequest, names: Sequence[str], heldout: tuple[int, int]
) -> dict[str, Any]:
    """The run settings shown at the top of the report."""
    harness = request.harness
    arguments = harness.lm_eval_arguments()
    return {
        "Model": spec.source,
        **({"Base model": spec.base_model} if spec.is_adapter else {}),
        "Backend": request.load.backend,
        "Chat template": "applied" if harness.apply_chat_template else "not applied",
        "Tasks": ", ".join(names) or "(none)",
        "Held-out conversations": _heldout_count(heldout, request.heldout.max_samples) if heldout[1] else "(none)",
        "Limit per task": "all" if arguments["limit"] is None else arguments["limit"],
        "Few-shot": "task default" if arguments["num_fewshot"] is None else arguments["num_fewshot"],
        "Generation settings": json.dumps(arguments["gen_kwargs"] or {}),
        "Seed": harness.seed,
    }


def _skipped(results_path: str, report_path: str, source: str, reason: str) -> LmEvalResult:
    """Writes the outputs of an evaluation that did not run: results with a ``skipped`` entry, a report saying why."""
    _log(f"skipped: {reason}")
    results = {**EMPTY_RESULTS, "skipped": reason}
    write_text_atomically(Path(results_path), json.dumps(results, indent=2) + "\n")
    write_text_atomically(Path(report_path), render_report(results, {"Not evaluated": reason}))
    return LmEvalResult(metrics={}, results_metadata={"model": source, "skipped": reason})


def located_model_source(request: LmEvalRequest) -> str:
    """``model_source``, or with ``pvc_path`` its copy downloaded onto the workspace once per run."""
    source = request.load.model_source
    if not source or not request.pvc_path.strip():
        return source
    staged = stage_base_model(source, request.pvc_path, os.environ, parameter="model_source", log=_log)
    return str(staged.path) if staged is not None else source


def _skip_reason(request: LmEvalRequest) -> tuple[str, str]:
    """``(the model source located, "")``, or ``("", why the evaluation is skipped)``."""
    load = request.load
    if not request.enabled:
        return "", "turned off (enabled is false)"
    try:
        source = located_model_source(request)
    except BaseModelError as error:
        if not load.skip_unusable_model_source:
            raise
        return "", f"model_source not staged: {error}"
    if load.skip_unusable_model_source:
        template = request.harness.apply_chat_template
        unusable = unusable_source_reason(source, load.backend, load.model_args, template)
        if unusable:
            return "", f"model_source {unusable}"
    return source, ""


@masked
def run_lm_eval(request: LmEvalRequest, results_path: str, report_path: str) -> LmEvalResult:
    """Evaluates a model with lm-eval and writes the results JSON and the HTML report.

    Raises:
        ValueError: A model, held-out dataset or task name that cannot be evaluated (one line naming it).
        BenchmarkDataError: A benchmark dataset cannot be reached.
    """
    load, eval_dataset = request.load, request.eval_dataset.path
    model_source, skipped = _skip_reason(request)
    if skipped:
        return _skipped(results_path, report_path, load.model_source or request.model.path, skipped)
    model_dir = str(resolve_model_dir(request.model.path)) if request.model.path and not model_source else ""
    spec = resolve_model(model_dir, request.model.metadata, model_source, load.backend, load.model_args)
    if not request.remote.is_remote:
        check_backend_available(load.backend)
    baseline = load_baseline(Path(request.baseline_results.path)) if request.baseline_results.path else None
    heldout = bool(eval_dataset)
    if heldout and request.heldout.allow_empty_eval_dataset and is_empty_dataset(Path(eval_dataset)):
        _log(f"eval_dataset {eval_dataset} is empty: held-out tasks skipped (allow_empty_eval_dataset)")
        heldout = False
    names = check_task_names(request.task_names, heldout)
    if not names and not eval_dataset:
        raise ValueError("nothing to evaluate: task_names is empty and no eval_dataset was given")
    device = resolve_device(load.device, load.backend)
    ensure_writable_hf_cache()
    _log(f"model {spec.source}" + (f" (PEFT adapter on {spec.base_model})" if spec.is_adapter else ""))

    results: dict[str, Any] = dict(EMPTY_RESULTS)
    lineage: dict[str, Any] = {}
    counts = (0, 0)
    with tempfile.TemporaryDirectory(prefix="lm-eval-tasks-") as staging:
        names, include_paths = stage_task_dirs(names, Path(staging))
        if request.custom_tasks.path:
            include_paths.insert(0, stage_custom_tasks(Path(request.custom_tasks.path), Path(staging) / "custom"))
        if heldout:
            include_paths.append(Path(staging) / "heldout")
            counts = _write_heldout(spec, request, include_paths[-1])
            names = list(dict.fromkeys([*names, *HELDOUT_TASKS]))
        if names and (request.remote.is_remote or request.remote.hardware_profile):
            from components.evaluation.lm_eval.remote_evaluation import evaluate_on_backend

            staged = Path(staging) / "heldout" if heldout else None
            remote_results, lineage = evaluate_on_backend(request, spec, names, staged, _log)
            results = remote_results or results
        if names and not request.remote.is_remote:
            _log(f"evaluating {', '.join(names)}")
            manager = build_task_manager(names, include_paths)
            results = _evaluate(spec, names, manager, request.harness, device)

    written = {key: value for key, value in results.items() if key != "samples" or request.harness.log_samples}
    from lm_eval.utils import handle_non_serializable  # numpy scalars as numbers, anything else as text

    text = json.dumps(written, indent=2, default=handle_non_serializable, ensure_ascii=False) + "\n"
    write_text_atomically(Path(results_path), text)
    settings = _report_settings(spec, request, names, counts)
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
        "backend": load.backend,
        "tasks": names,
        "apply_chat_template": request.harness.apply_chat_template,
        "heldout_rows": counts[0],
        "heldout_rows_available": counts[1],
        "lm_eval_version": str(results.get("lm_eval_version", "")),
        **compared_to,
        **lineage,
    }
    described = read_dataset_metadata(request.eval_dataset.metadata, "lm_eval input eval_dataset")
    if described is not None:
        metadata["dataset_uri"] = described.dataset_uri
    return LmEvalResult(metrics=metrics, results_metadata=mask_data(metadata, patterns=False))
