"""What the Training Hub in the training image can do: its version, and the keywords each of its functions takes.

RHOAI 3.3 carries 0.3.0 (no ``lora_sft``), 3.5 0.6.0; this project pins 0.11.2. Standard library only at import.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import inspect
import platform
import re
from collections.abc import Callable, Mapping
from typing import Any

#: The distributions whose versions the pod prints first (the Training Hub stack of the runtime image).
DISTRIBUTIONS = ("training-hub", "instructlab-training", "rhai-innovation-mini-trainer", "transformers", "torch")

#: The first Training Hub release whose functions take ``enable_jit_checkpoint`` (read from the released wheels).
JIT_CHECKPOINT_SINCE = "0.11.0"
_JIT = (
    "just-in-time checkpoints on SIGTERM (training_jit_checkpoint): a paused or preempted job resumes from its last "
    "saved checkpoint instead",
    f"training-hub >= {JIT_CHECKPOINT_SINCE}",
)
_MLFLOW = ("MLflow tracking (the training run is not logged to MLflow)", "training-hub >= 0.6.0")
_VALIDATION = "validation on the eval split during training (the pipeline's evaluation step still scores it)"

#: Options the run does without (one note) where the installed Training Hub lacks them: keyword -> (what the run
#: loses, the first release whose function takes it).
OPTIONAL_KEYWORDS: dict[str, tuple[str, str]] = {
    "enable_jit_checkpoint": _JIT,
    "mlflow_tracking_uri": _MLFLOW,
    "mlflow_experiment_name": _MLFLOW,
    "mlflow_run_name": _MLFLOW,
    # OSFT: mini-trainer's TrainingArgs has validation_data_path from 0.9.0 (training-hub 0.9.x/0.11.x pin >= 0.8.3).
    "validation_data_path": (_VALIDATION, "rhai-innovation-mini-trainer >= 0.9.0 (OSFT's backend)"),
    "validate_at_final": (_VALIDATION, "rhai-innovation-mini-trainer >= 0.9.0 (OSFT's backend)"),
    "eval_data_path": (_VALIDATION, "training-hub >= 0.9.8"),  # lora_sft
}

#: The first Training Hub release with each function, read from the released wheels.
FIRST_RELEASE_WITH_FUNCTION = {
    "sft": "0.1.0",
    "osft": "0.1.0",
    "lora_sft": "0.4.0",
    "grpo": "0.9.2",  # training_hub.grpo and lora_grpo (verl, art) with tool_call_reward / binary_reward
    "lora_grpo": "0.9.2",
}

#: The Training Hub release this project is built and tested against (the pyproject pin).
NEWEST_TESTED = "0.11.2"

#: What to do instead, in every message: another runtime, or transformers.Trainer.
REMEDY = (
    "use a training runtime whose image carries {needs} (this project is tested with training-hub 0.3.0, 0.6.0, 0.9.8 "
    "and 0.11.2), or train_model's training_backend='transformers' (transformers.Trainer on the "
    "torch-distributed runtime)"
)


class TrainingHubUnsupported(ValueError):
    """The installed Training Hub lacks an algorithm or a setting the run needs; the message says which, and the fix."""


def installed_versions(distributions: tuple[str, ...] = DISTRIBUTIONS) -> dict[str, str]:
    """The installed version of each distribution (``""`` when it is not installed)."""
    versions = {}
    for name in distributions:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = ""
    return versions


def version_line(versions: Mapping[str, str]) -> str:
    """The pod's first line: ``training-hub 0.3.0 (instructlab-training 0.13.0, ..., Python 3.12.1)``."""
    hub = versions.get("training-hub") or "is not installed"
    rest = ", ".join(f"{name} {version}" for name, version in versions.items() if name != "training-hub" and version)
    return f"training-hub {hub} ({rest + ', ' if rest else ''}Python {platform.python_version()})"


def missing_function_message(version: str, function_name: str) -> str:
    """The one line for an algorithm the installed Training Hub lacks (``lora_sft`` on 0.3.x)."""
    first = FIRST_RELEASE_WITH_FUNCTION.get(function_name, NEWEST_TESTED)
    needs = f"training-hub >= {first}"
    if not version:
        return f"this runtime's image has no training-hub (so no {function_name}): " + REMEDY.format(needs=needs)
    return (
        f"training-hub {version} in this runtime's image has no {function_name} "
        f"({function_name} arrived in training-hub {first}): " + REMEDY.format(needs=needs)
    )


def _read_keys(backend: type) -> set[str]:
    """The keys a Training Hub backend's source reads from its ``params`` dict."""
    return set(re.findall(r"params(?:\.get\(|\[)['\"]([a-z0-9_]+)['\"]", inspect.getsource(backend)))


def _backend_keywords(function_name: str) -> set[str] | None:
    """The ``**kwargs`` keys the backend of ``training_hub.<function_name>`` reads; None when that cannot be told."""
    try:
        if function_name == "sft":
            from instructlab.training import TorchrunArgs, TrainingArgs

            return set(TrainingArgs.model_fields) | set(TorchrunArgs.model_fields)
        if function_name == "osft":
            from mini_trainer import TorchrunArgs, TrainingArgs

            return {field.name for cls in (TrainingArgs, TorchrunArgs) for field in dataclasses.fields(cls)}
        if function_name == "lora_sft":
            from training_hub.algorithms.lora import UnslothLoRABackend

            return _read_keys(UnslothLoRABackend)
        if function_name in ("grpo", "lora_grpo"):  # the keys verl's and ART's backends read from **kwargs
            from training_hub.algorithms.lora_grpo import ARTLoRAGRPOBackend
            from training_hub.algorithms.lora_grpo_verl import VeRLLoRAGRPOBackend

            return _read_keys(VeRLLoRAGRPOBackend) | _read_keys(ARTLoRAGRPOBackend)
    except Exception:  # noqa: BLE001 - a backend that does not import here (or moved): do not guess
        return None
    return None


def keywords_taken(function_name: str, function: Callable[..., Any]) -> set[str] | None:
    """The keywords ``function`` names plus those its backend reads from ``**kwargs`` (None when unknown)."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return None
    named = {name for name, p in parameters.items() if p.kind is not inspect.Parameter.VAR_KEYWORD}
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return named
    if not named:  # ``def sft(**kwargs)``: not a Training Hub release's signature (they name model_path, ...)
        return None
    backend = _backend_keywords(function_name)
    return None if backend is None else named | backend


def select_keywords(
    function_name: str,
    function: Callable[..., Any],
    kwargs: dict[str, Any],
    version: str,
    log: Callable[[str], Any] = print,
) -> dict[str, Any]:
    """``kwargs`` less the optional keywords the installed ``function`` does not take (one note line each).

    Raises:
        TrainingHubUnsupported: A training setting (not an option) is not taken.
    """
    taken = keywords_taken(function_name, function)
    if taken is None:
        log(f"note: cannot tell which keywords training-hub {version} {function_name} takes; passing them all")
        return dict(kwargs)
    missing = [key for key in kwargs if key not in taken]
    settings = [key for key in missing if key not in OPTIONAL_KEYWORDS]
    if settings:
        shown = ", ".join(f"{key}={kwargs[key]!r}" for key in settings)
        needs = f"training-hub {NEWEST_TESTED}"
        raise TrainingHubUnsupported(
            f"training-hub {version} in this runtime's image: {function_name} does not take {shown} (the run's "
            f"settings need it; {needs} takes it): " + REMEDY.format(needs=needs)
        )
    lost: dict[str, list[str]] = {}
    for key in missing:
        lost.setdefault(OPTIONAL_KEYWORDS[key][0], []).append(key)
    for what, keys in lost.items():
        remedy = REMEDY.format(needs=OPTIONAL_KEYWORDS[keys[0]][1])
        log(f"note: training-hub {version} {function_name} does not take {', '.join(keys)}: running without {what}; "
            f"to have it, {remedy}")  # fmt: skip
    return {key: value for key, value in kwargs.items() if key not in missing}
