"""Which model lm-eval loads, and how: a full checkpoint, a PEFT adapter on its base model, or a Hub id."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Model backends this component knows: lm-eval's model names.
BACKENDS = ("hf", "vllm")

_WEIGHT_GLOBS = ("*.safetensors", "pytorch_model*.bin", "*.safetensors.index.json", "pytorch_model.bin.index.json")
_ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "spiece.model", "vocab.txt")
#: ``model_args`` keys the component sets itself from ``model`` / ``model_source``.
_MODEL_KEYS = {"pretrained", "peft", "lora_local_path"}
#: ``model_args`` keys that would carry a credential: tokens come from the ``HF_TOKEN`` environment variable.
_SECRET_KEYS = {"token", "use_auth_token", "hf_token", "auth_token", "api_key"}


class ModelSourceError(ValueError):
    """The model to evaluate is missing files or cannot be located."""


@dataclass(frozen=True)
class ModelSpec:
    """What lm-eval loads: its model name and arguments, the tokenizer, the source, an adapter's base ("" if none)."""

    lm_eval_model: str
    model_args: dict[str, Any] = field(default_factory=dict)
    tokenizer_source: str = ""
    source: str = ""
    base_model: str = ""

    @property
    def is_adapter(self) -> bool:
        """Whether the evaluated model is a PEFT adapter on :attr:`base_model`."""
        return bool(self.base_model)


def unloadable_source_reason(source: str, check_paths: bool = False) -> str:
    """Why lm-eval cannot load ``source`` here ("" when it can): a URI, or (``check_paths``) a path this pod lacks."""
    scheme, separator, _ = source.partition("://")
    if not separator or not scheme or "/" in scheme:
        if check_paths and source and looks_like_path(source) and not Path(source).expanduser().is_dir():
            return f"{source!r} is no directory in this pod (a path on a volume only the training pod mounts?)"
        return ""
    return (
        f"{source!r} is a {scheme}:// URI; lm-eval loads a Hugging Face Hub id or a local directory in "
        "save_pretrained layout"
    )


def looks_like_path(source: str) -> bool:
    """Whether a model source names a local path (rather than a Hugging Face Hub id such as ``org/name``)."""
    return source.startswith(("/", "./", "../", "~")) or os.path.exists(source)


def _has_any(directory: Path, names: tuple[str, ...]) -> bool:
    return any(next(directory.glob(name), None) is not None for name in names)


def _check_full_model(directory: Path, where: str) -> None:
    """Checks a full checkpoint directory: ``config.json``, weights and tokenizer files."""
    wanted = {"config.json": ("config.json",), "weights": _WEIGHT_GLOBS, "tokenizer": _TOKENIZER_FILES}
    missing = [
        name if name == "config.json" else f"{name} ({' or '.join(globs)})"
        for name, globs in wanted.items()
        if not _has_any(directory, globs)
    ]
    if missing:
        raise ModelSourceError(
            f"{where}: {directory} is not a model in Hugging Face save_pretrained layout: missing {', '.join(missing)}"
        )


def _adapter_base(adapter_config: dict, metadata: Mapping[str, Any], where: str, directory: Path) -> str:
    """An adapter's base: the first of its candidates reachable here (a directory of this pod, or a Hub id)."""
    candidates = [
        ("adapter_config.json base_model_name_or_path", str(adapter_config.get("base_model_name_or_path") or "")),
        ("model.metadata['base_model']", str(metadata.get("base_model") or "")),
    ]
    if metadata.get("base_model_path"):
        candidates.insert(0, ("model.metadata['base_model_path']", str(metadata["base_model_path"])))
    for _, value in candidates:
        if value and (not looks_like_path(value) or Path(value).expanduser().is_dir()):
            return str(Path(value).expanduser()) if looks_like_path(value) else value
    tried = "; ".join(f"{name}={value!r}" + (" (not found here)" if value else "") for name, value in candidates)
    raise ModelSourceError(
        f"{where}: {directory} is a PEFT adapter but its base model cannot be located ({tried}); "
        "record a reachable path or Hub id in one of them"
    )


def _adapter_spec(directory: Path, metadata: Mapping[str, Any], backend: str, where: str) -> ModelSpec:
    """Resolves a PEFT adapter directory to lm-eval arguments that load it on its base model."""
    if not _has_any(directory, _ADAPTER_WEIGHTS):
        raise ModelSourceError(
            f"{where}: {directory} has adapter_config.json but no adapter weights ({' or '.join(_ADAPTER_WEIGHTS)})"
        )
    config = json.loads((directory / "adapter_config.json").read_text(encoding="utf-8"))
    base = _adapter_base(config, metadata, where, directory)
    tokenizer = str(directory) if _has_any(directory, _TOKENIZER_FILES) else base
    if tokenizer == base and looks_like_path(base) and not _has_any(Path(base), _TOKENIZER_FILES):
        raise ModelSourceError(
            f"{where}: no tokenizer in the adapter {directory} nor in its base model {base} "
            f"({' or '.join(_TOKENIZER_FILES)})"
        )
    if backend == "vllm":
        args = {"pretrained": base, "tokenizer": tokenizer, "lora_local_path": str(directory)}
        if int(config.get("r") or 0) > 16:
            args["max_lora_rank"] = int(config["r"])
    else:
        args = {"pretrained": base, "peft": str(directory), "tokenizer": tokenizer}
    return ModelSpec(backend, args, tokenizer, str(directory), base)


def check_model_args(model_args: Mapping[str, Any]) -> None:
    """Refuses (``ValueError``) ``model_args`` keys the component sets itself or that would carry a credential."""
    if not isinstance(model_args, Mapping):
        raise ValueError(f"model_args must be a dict, got {type(model_args).__name__}: {model_args!r}")
    for key in model_args:
        if key in _MODEL_KEYS:
            raise ValueError(
                f"model_args[{key!r}] is set by the component from `model` (or `model_source`); "
                "pass the model there instead"
            )
        if key.lower() in _SECRET_KEYS:
            raise ValueError(
                f"model_args[{key!r}] would put a credential in the parameters, logs and results; "
                "provide the Hub token through the HF_TOKEN environment variable (a Kubernetes secret) instead"
            )


def resolve_model(
    model_path: str,
    model_metadata: Mapping[str, Any],
    model_source: str,
    backend: str,
    model_args: Mapping[str, Any] | None = None,
) -> ModelSpec:
    """What lm-eval loads for a ``model`` directory (full model or PEFT adapter) or an overriding ``model_source``.

    Raises:
        ModelSourceError: The directory misses weights or tokenizer, or an adapter's base cannot be located.
    """
    model_args = dict(model_args or {})
    where = "model_source" if model_source else "model"
    source = model_source or model_path
    if not source:
        raise ModelSourceError("model: no path given (the model artifact has no path and model_source is empty)")
    unloadable = unloadable_source_reason(source)
    if unloadable:
        raise ModelSourceError(f"{where}: {unloadable}")
    if not looks_like_path(source):
        spec = ModelSpec(backend, {"pretrained": source}, source, source)
    else:
        directory = Path(source).expanduser()
        if not directory.is_dir():
            raise ModelSourceError(f"{where}: {directory} does not exist or is not a directory")
        if (directory / "adapter_config.json").is_file():
            spec = _adapter_spec(directory, model_metadata if not model_source else {}, backend, where)
        else:
            _check_full_model(directory, where)
            spec = ModelSpec(backend, {"pretrained": str(directory)}, str(directory), str(directory))
    merged = {**spec.model_args, **model_args}
    return ModelSpec(
        spec.lm_eval_model, merged, str(merged.get("tokenizer") or spec.tokenizer_source), spec.source, spec.base_model
    )


def load_tokenizer(spec: ModelSpec) -> Any:
    """Loads the evaluated model's tokenizer (for the held-out prompts and per-token scores)."""
    from transformers import AutoTokenizer

    trust = bool(spec.model_args.get("trust_remote_code", False))
    return AutoTokenizer.from_pretrained(spec.tokenizer_source, trust_remote_code=trust)


def unusable_source_reason(
    model_source: str, backend: str, model_args: Mapping[str, Any] | None, apply_chat_template: bool
) -> str:
    """Why ``model_source`` cannot be evaluated as asked (unloadable, or no chat template asked for); "" when it can."""
    if not model_source:
        return ""
    reason = unloadable_source_reason(model_source, check_paths=True)
    if reason or not apply_chat_template:
        return reason
    if getattr(load_tokenizer(resolve_model("", {}, model_source, backend, model_args)), "chat_template", None):
        return ""
    return f"{model_source!r} has no chat template and apply_chat_template is true (compare with it set to false)"
