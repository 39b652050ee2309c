"""Where each keyword of a real Training Hub call lands: the function's parameters, or the backend's config.

``training_hub.sft`` / ``osft`` / ``lora_sft`` take ``**kwargs`` that each backend handles differently:

* SFT (instructlab-training): everything is passed to ``instructlab.training.TrainingArgs(**params)`` (pydantic), so
  a keyword must be a ``TrainingArgs`` field;
* OSFT (mini-trainer): the backend keeps only ``mini_trainer.TrainingArgs`` / ``TorchrunArgs`` dataclass fields and
  silently drops the rest, so a keyword outside them would be lost;
* LoRA (Unsloth): the parameters dict is read key by key by ``UnslothLoRABackend``; a keyword it never reads is
  ignored.
"""

from __future__ import annotations

import dataclasses
import inspect
import re


def named_parameters(function_name: str) -> set[str]:
    """The named parameters of the installed ``training_hub.<function_name>`` (``**kwargs`` excluded)."""
    import training_hub

    signature = inspect.signature(getattr(training_hub, function_name))
    return {name for name, p in signature.parameters.items() if p.kind is not inspect.Parameter.VAR_KEYWORD}


def backend_keywords(function_name: str) -> set[str]:
    """The ``**kwargs`` keys that reach the backend of ``training_hub.<function_name>`` (see the module docstring)."""
    if function_name == "sft":
        from instructlab.training import TrainingArgs

        return set(TrainingArgs.model_fields)
    if function_name == "osft":
        from mini_trainer import TorchrunArgs, TrainingArgs

        return {field.name for cls in (TrainingArgs, TorchrunArgs) for field in dataclasses.fields(cls)}
    if function_name == "lora_sft":
        from training_hub.algorithms.lora import UnslothLoRABackend

        source = inspect.getsource(UnslothLoRABackend)
        return set(re.findall(r"params(?:\.get\(|\[)'([a-z0-9_]+)'", source))
    raise ValueError(function_name)


def unknown_keywords(function_name: str, kwargs: dict) -> set[str]:
    """The keywords of ``kwargs`` that neither the function names nor its backend reads."""
    return set(kwargs) - named_parameters(function_name) - backend_keywords(function_name)


def assert_lands_in_training_hub(call: dict) -> None:
    """A recorded call (``{"function", "kwargs"}``) binds to the real function and each keyword reaches its backend."""
    import training_hub

    inspect.signature(getattr(training_hub, call["function"])).bind(**call["kwargs"])
    assert not unknown_keywords(call["function"], call["kwargs"]), unknown_keywords(call["function"], call["kwargs"])
