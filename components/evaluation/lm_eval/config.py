"""``lm_eval``'s request: its arguments in a few typed option groups (:data:`GROUPS`), checked once when built.

No field has a default (they live once, in the component's signature).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from components._common import arguments
from components.evaluation.lm_eval.model_spec import BACKENDS, check_model_args

LOCAL_BACKEND = "lm-eval"
EVAL_BACKENDS = (LOCAL_BACKEND, "lmevaljob", "evalhub")
#: Aliases of the generation length that lm-eval ranks below ``max_gen_toks`` (a task's own value would win).
_MAX_TOKEN_ALIASES = ("max_new_tokens", "max_tokens", "max_completion_tokens")


#: The rule of each numeric option: ``name -> (whether a value is allowed, what it must be)``.
_RANGES: dict[str, tuple[Callable[[int], bool], str]] = {
    "limit": (lambda value: value == -1 or value > 0, "-1 (all documents) or a positive count"),
    "num_fewshot": (lambda value: value >= -1, "-1 (task default) or >= 0"),
    "bootstrap_iters": (lambda value: value >= 0, ">= 0"),
    "max_samples": (lambda value: value == -1 or value > 0, "-1 (all rows) or a positive count"),
    "max_new_tokens": (lambda value: value >= 1, "a positive number of tokens"),
}


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def _check_ranges(group: Any) -> None:
    """Refuses a numeric option of ``group`` that breaks its rule (:data:`_RANGES`), naming it and the value."""
    for field in dataclasses.fields(group):
        value = getattr(group, field.name)
        allowed, rule = _RANGES.get(field.name, (lambda _: True, ""))
        nothing = ": it would evaluate nothing" if field.name == "limit" and value == 0 else ""
        _require(allowed(value), f"{field.name} must be {rule}, got {value}{nothing}")


def parse_batch_size(batch_size: str) -> str | int:
    """``batch_size`` as lm-eval takes it: ``auto``, ``auto:N`` (N re-detections) or a positive integer (an int)."""
    text = str(batch_size).strip()
    if text == "auto" or (text.startswith("auto:") and text[5:].isdigit() and int(text[5:]) > 0):
        return text
    if not (text.isdigit() and int(text) > 0):
        raise ValueError(f"batch_size must be 'auto', 'auto:N' or a positive integer, got {batch_size!r}")
    return int(text)


def normalize_gen_kwargs(gen_kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The user's generation settings (None when empty), renamed so that they win over the tasks' own.

    lm-eval reads ``max_gen_toks`` first; a positive ``temperature`` turns sampling on unless ``do_sample`` is given.
    """
    if not isinstance(gen_kwargs, Mapping):
        raise ValueError(f"gen_kwargs must be a dict, got {type(gen_kwargs).__name__}: {gen_kwargs!r}")
    if not gen_kwargs:
        return None
    kwargs = dict(gen_kwargs)
    for key in kwargs:
        _require(isinstance(key, str), f"gen_kwargs keys must be strings, got {key!r}")
    for alias in _MAX_TOKEN_ALIASES:
        if alias in kwargs and "max_gen_toks" not in kwargs:
            kwargs["max_gen_toks"] = kwargs.pop(alias)
    if "do_sample" not in kwargs and float(kwargs.get("temperature") or 0) > 0:
        kwargs["do_sample"] = True
    return kwargs


@dataclasses.dataclass(frozen=True)
class InputArtifact:
    """An optional input artifact: its local path and metadata (``""`` and ``{}`` when it is not given)."""

    path: str
    metadata: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class LoadOptions:
    """How the model is loaded: an overriding ``model_source``, lm-eval's model backend, its arguments, the device."""

    model_source: str
    model_args: dict
    backend: str
    device: str
    skip_unusable_model_source: bool

    def __post_init__(self) -> None:
        _require(self.backend in BACKENDS, f"backend must be one of {sorted(BACKENDS)}, got {self.backend!r}")
        check_model_args(self.model_args)


@dataclasses.dataclass(frozen=True)
class HarnessOptions:
    """How lm-eval evaluates, on every backend: batch, documents, shots, generation, chat template, seed, samples."""

    batch_size: str
    limit: int
    num_fewshot: int
    gen_kwargs: dict
    apply_chat_template: bool
    seed: int
    log_samples: bool
    bootstrap_iters: int

    def __post_init__(self) -> None:
        _check_ranges(self)
        parse_batch_size(self.batch_size)
        normalize_gen_kwargs(self.gen_kwargs)

    def lm_eval_arguments(self) -> dict[str, Any]:
        """The options as ``lm_eval.simple_evaluate`` takes them (``None``: all documents, each task's shots)."""
        return {
            "batch_size": parse_batch_size(self.batch_size),
            "limit": None if self.limit == -1 else int(self.limit),
            "num_fewshot": None if self.num_fewshot == -1 else int(self.num_fewshot),
            "gen_kwargs": normalize_gen_kwargs(self.gen_kwargs),
            "apply_chat_template": bool(self.apply_chat_template),
            "bootstrap_iters": int(self.bootstrap_iters),
        }


@dataclasses.dataclass(frozen=True)
class HeldoutOptions:
    """How the held-out split (``eval_dataset``) becomes tasks: how many conversations, how long an answer."""

    max_samples: int
    max_new_tokens: int
    allow_empty_eval_dataset: bool

    def __post_init__(self) -> None:
        _check_ranges(self)


@dataclasses.dataclass(frozen=True)
class RemoteOptions:
    """Where the evaluation runs (``eval_backend``), on which hardware profile, and a remote one's limits."""

    eval_backend: str
    hardware_profile: str
    evalhub_url: str
    eval_timeout_seconds: int
    eval_cleanup_policy: str

    def __post_init__(self) -> None:
        backend = self.eval_backend
        _require(backend in EVAL_BACKENDS, f"eval_backend={backend!r}: must be one of {list(EVAL_BACKENDS)}")
        _require(
            backend != "evalhub" or self.evalhub_url.startswith(("http://", "https://")),
            f"evalhub_url={self.evalhub_url!r}: eval_backend='evalhub' needs EvalHub's http(s) URL",
        )

    @property
    def is_remote(self) -> bool:
        """Whether a service outside this step evaluates (``lmevaljob``, ``evalhub``)."""
        return self.eval_backend != LOCAL_BACKEND


@dataclasses.dataclass(frozen=True)
class LmEvalRequest:
    """``lm_eval``'s arguments in groups; built only by :func:`lm_eval_request`, no field has a default."""

    model: InputArtifact
    eval_dataset: InputArtifact
    baseline_results: InputArtifact
    custom_tasks: InputArtifact
    task_names: list
    enabled: bool
    pvc_path: str
    load: LoadOptions
    harness: HarnessOptions
    heldout: HeldoutOptions
    remote: RemoteOptions

    def __post_init__(self) -> None:
        backend = self.remote.eval_backend
        _require(
            not (self.remote.is_remote and self.custom_tasks.path),
            f"custom_tasks: only eval_backend='lm-eval' runs them (got eval_backend={backend!r})",
        )
        _require(
            not self.remote.is_remote or bool(self.pvc_path),
            f"eval_backend={backend!r} reads the model and the held-out task from the workspace PVC: pass "
            "pvc_path=dsl.WORKSPACE_PATH_PLACEHOLDER",
        )


#: Each option group of the request: its type, and the prefix its fields take as parameters (none: the same names).
GROUPS: dict[str, tuple[type, str]] = {
    "load": (LoadOptions, ""),
    "harness": (HarnessOptions, ""),
    "heldout": (HeldoutOptions, ""),
    "remote": (RemoteOptions, ""),
}
#: The output artifacts: written by the wrapper from the outcome, not part of the request.
OUTPUTS = ("metrics", "results", "report")
#: The input artifacts (the request's own fields), kept as their path and metadata.
ARTIFACTS = ("model", "eval_dataset", "baseline_results", "custom_tasks")


def _own_field(name: str, value: Any) -> Any:
    """An input artifact as its path and metadata; the request's other own fields as given."""
    if name not in ARTIFACTS:
        return value
    path = arguments.artifact_path("lm_eval", name, value)
    return InputArtifact(path, dict(value.metadata or {}) if value is not None else {})


def lm_eval_request(values: Mapping[str, Any]) -> LmEvalRequest:
    """``lm_eval``'s arguments (the wrapper's ``dict(locals())``) but the outputs, each in its group, checked.

    Raises:
        TypeError: A name is missing or unknown, or an input artifact is not artifact-like.
        ValueError: A value breaks a rule (the message names the parameter and the value).
    """
    return arguments.grouped_request("lm_eval", LmEvalRequest, GROUPS, values, OUTPUTS, own=_own_field)


def check_options(values: Mapping[str, Any]) -> None:
    """Checks the harness and held-out options among ``values`` (by parameter name) as the request does."""
    for group in ("harness", "heldout"):
        arguments.option_group(GROUPS, group, values)
