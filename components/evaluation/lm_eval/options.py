"""The lm_eval run settings checked and turned into lm-eval's arguments, before anything heavy is imported."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Aliases of the generation length that lm-eval ranks below ``max_gen_toks`` (a task's own value would win).
_MAX_TOKEN_ALIASES = ("max_new_tokens", "max_tokens", "max_completion_tokens")


def parse_batch_size(batch_size: str) -> str | int:
    """Checks ``batch_size``: ``auto``, ``auto:N`` (N re-detections) or a positive integer (returned as an int).

    Raises:
        ValueError: Any other value.
    """
    text = str(batch_size).strip()
    if text == "auto" or (text.startswith("auto:") and text[5:].isdigit() and int(text[5:]) > 0):
        return text
    if text.isdigit() and int(text) > 0:
        return int(text)
    raise ValueError(f"batch_size must be 'auto', 'auto:N' or a positive integer, got {batch_size!r}")


def limit_arg(limit: int) -> int | None:
    """Checks ``limit`` (documents per task): -1 = all (None for lm-eval), else a positive count.

    Raises:
        ValueError: 0 (would evaluate nothing) or another negative value.
    """
    if limit == -1:
        return None
    if limit <= 0:
        nothing = ": it would evaluate nothing" if limit == 0 else ""
        raise ValueError(f"limit must be -1 (all documents) or a positive count, got {limit}{nothing}")
    return int(limit)


def num_fewshot_arg(num_fewshot: int) -> int | None:
    """Checks ``num_fewshot``: -1 keeps each task's default, else 0 or more examples.

    Raises:
        ValueError: A negative value other than -1.
    """
    if num_fewshot == -1:
        return None
    if num_fewshot < 0:
        raise ValueError(f"num_fewshot must be -1 (task default) or >= 0, got {num_fewshot}")
    return int(num_fewshot)


def normalize_gen_kwargs(gen_kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The user's generation settings for ``lm_eval.simple_evaluate`` (None when empty), made to win over the tasks'.

    lm-eval reads the length from ``max_gen_toks`` first, so ``max_new_tokens`` (or ``max_tokens``) is renamed to it;
    a positive ``temperature`` without ``do_sample`` turns sampling on (tasks default to greedy decoding).

    Raises:
        ValueError: Not a dict, or a key is not a string.
    """
    if not isinstance(gen_kwargs, Mapping):
        raise ValueError(f"gen_kwargs must be a dict, got {type(gen_kwargs).__name__}: {gen_kwargs!r}")
    if not gen_kwargs:
        return None
    kwargs = dict(gen_kwargs)
    for key in kwargs:
        if not isinstance(key, str):
            raise ValueError(f"gen_kwargs keys must be strings, got {key!r}")
    for alias in _MAX_TOKEN_ALIASES:
        if alias in kwargs and "max_gen_toks" not in kwargs:
            kwargs["max_gen_toks"] = kwargs.pop(alias)
    if "do_sample" not in kwargs and float(kwargs.get("temperature") or 0) > 0:
        kwargs["do_sample"] = True
    return kwargs


def check_options(
    batch_size: str,
    limit: int,
    num_fewshot: int,
    gen_kwargs: Mapping[str, Any] | None,
    apply_chat_template: bool,
    seed: int,
    max_samples: int,
    max_new_tokens: int,
    bootstrap_iters: int,
) -> dict[str, Any]:
    """Checks the run settings and returns each, by name, as lm-eval and the task writer take it.

    Raises:
        ValueError: A value is out of range (the message names the parameter and the value).
    """
    if max_samples == 0 or max_samples < -1:
        raise ValueError(f"max_samples must be -1 (all rows) or a positive count, got {max_samples}")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive number of tokens, got {max_new_tokens}")
    if bootstrap_iters < 0:
        raise ValueError(f"bootstrap_iters must be >= 0, got {bootstrap_iters}")
    return {
        "batch_size": parse_batch_size(batch_size),
        "limit": limit_arg(limit),
        "num_fewshot": num_fewshot_arg(num_fewshot),
        "gen_kwargs": normalize_gen_kwargs(gen_kwargs or {}),
        "apply_chat_template": bool(apply_chat_template),
        "seed": int(seed),
        "bootstrap_iters": int(bootstrap_iters),
        "max_samples": int(max_samples),
        "max_new_tokens": int(max_new_tokens),
    }
