"""Parameter checks of the lm_eval component: each bad value fails at once, naming the parameter."""

import importlib.util
import os

import pytest

from components.evaluation.lm_eval.options import (
    check_options,
    limit_arg,
    normalize_gen_kwargs,
    num_fewshot_arg,
    parse_batch_size,
)
from components.evaluation.lm_eval.run import check_backend_available, ensure_writable_hf_cache
from components.evaluation.lm_eval.task_index import check_task_names, unknown_task_message


@pytest.mark.parametrize(("value", "expected"), [("auto", "auto"), ("auto:4", "auto:4"), ("16", 16), (" 8 ", 8)])
def test_batch_size(value, expected):
    assert parse_batch_size(value) == expected


@pytest.mark.parametrize("value", ["0", "-1", "big", "auto:0", "auto:x", ""])
def test_bad_batch_size(value):
    with pytest.raises(ValueError, match=f"batch_size must be .*got {value!r}"):
        parse_batch_size(value)


def test_limit_and_num_fewshot():
    assert limit_arg(-1) is None and limit_arg(5) == 5
    with pytest.raises(ValueError, match="limit must be .* got 0: it would evaluate nothing"):
        limit_arg(0)
    with pytest.raises(ValueError, match="limit must be .* got -3"):
        limit_arg(-3)
    assert num_fewshot_arg(-1) is None and num_fewshot_arg(0) == 0 and num_fewshot_arg(5) == 5
    with pytest.raises(ValueError, match="num_fewshot must be .* got -2"):
        num_fewshot_arg(-2)


def test_gen_kwargs_are_normalized_so_that_they_win_over_the_tasks():
    assert normalize_gen_kwargs({}) is None
    assert normalize_gen_kwargs({"max_new_tokens": 3}) == {"max_gen_toks": 3}
    assert normalize_gen_kwargs({"max_tokens": 3, "max_gen_toks": 5}) == {"max_tokens": 3, "max_gen_toks": 5}
    assert normalize_gen_kwargs({"temperature": 0.7}) == {"temperature": 0.7, "do_sample": True}
    assert normalize_gen_kwargs({"temperature": 0.7, "do_sample": False}) == {"temperature": 0.7, "do_sample": False}
    assert normalize_gen_kwargs({"temperature": 0}) == {"temperature": 0}
    with pytest.raises(ValueError, match="gen_kwargs must be a dict"):
        normalize_gen_kwargs("temperature=0.7")


def test_task_names():
    assert check_task_names(["arc_easy", "arc_easy", " hellaswag "], heldout=False) == ["arc_easy", "hellaswag"]
    assert check_task_names([], heldout=True) == []
    with pytest.raises(ValueError, match=r"task_names\[1\] must be a non-empty string"):
        check_task_names(["arc_easy", ""], heldout=False)
    with pytest.raises(ValueError, match="task_names must be a list"):
        check_task_names("arc_easy", heldout=False)
    with pytest.raises(ValueError, match=r"task_names\[0\] = 'heldout_generation' is built from eval_dataset"):
        check_task_names(["heldout_generation"], heldout=False)


def test_unknown_task_message_lists_close_matches():
    known = ["arc_easy", "arc_challenge", "hellaswag", "heldout_generation"]
    message = unknown_task_message(["arc_eazy", "zzz"], known)
    assert "unknown lm-eval task 'arc_eazy' (close matches: arc_easy" in message
    assert "unknown lm-eval task 'zzz' (no close match)" in message


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_vllm_backend_without_vllm_fails_early():
    with pytest.raises(ValueError, match="backend 'vllm' needs the vllm package"):
        check_backend_available("vllm")
    check_backend_available("hf")


def test_a_configured_hf_cache_is_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    ensure_writable_hf_cache()
    assert os.environ["HF_HOME"] == str(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_a_read_only_home_gets_a_temporary_hf_cache(monkeypatch, tmp_path):
    home = tmp_path / "home"
    (home / ".cache").mkdir(parents=True)
    (home / ".cache").chmod(0o500)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.delenv("HF_DATASETS_CACHE", raising=False)
    ensure_writable_hf_cache()
    assert os.access(os.environ["HF_HOME"], os.W_OK)
    assert not os.environ["HF_HOME"].startswith(str(home))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"max_samples": 0}, "max_samples must be -1 .* got 0"),
        ({"max_new_tokens": 0}, "max_new_tokens must be a positive number of tokens, got 0"),
        ({"bootstrap_iters": -5}, "bootstrap_iters must be >= 0, got -5"),
        ({"limit": 0}, "limit must be"),
        ({"batch_size": "many"}, "batch_size must be"),
    ],
)
def test_check_options_names_the_bad_parameter(change, message):
    settings = {
        "batch_size": "auto",
        "limit": -1,
        "num_fewshot": -1,
        "gen_kwargs": {},
        "apply_chat_template": True,
        "seed": 1,
        "max_samples": -1,
        "max_new_tokens": 4,
        "bootstrap_iters": 0,
    }
    assert check_options(**settings)["limit"] is None
    with pytest.raises(ValueError, match=message):
        check_options(**{**settings, **change})
