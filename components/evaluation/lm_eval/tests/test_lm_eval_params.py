"""The lm_eval request: every argument in its group, and each bad value refused at once, naming the parameter."""

import importlib.util
import inspect
import os
from types import SimpleNamespace

import pytest

from components._common.arguments import parameter_fields
from components.evaluation.lm_eval import lm_eval
from components.evaluation.lm_eval.config import GROUPS, OUTPUTS, LmEvalRequest, normalize_gen_kwargs, parse_batch_size
from components.evaluation.lm_eval.config import lm_eval_request as build
from components.evaluation.lm_eval.custom_task import check_task_names, unknown_task_message
from components.evaluation.lm_eval.run import check_backend_available, ensure_writable_hf_cache
from tests.harness.requests import lm_eval_request, wrapper_arguments

PARAMETERS = inspect.signature(lm_eval.python_func).parameters
ARTIFACTS = ("model", "eval_dataset", "baseline_results", "custom_tasks")


def test_every_argument_lands_in_its_group_and_artifacts_keep_path_and_metadata():
    assert set(parameter_fields(LmEvalRequest, GROUPS)) | set(OUTPUTS) == set(PARAMETERS)
    inputs = {name for name, p in PARAMETERS.items() if "InputAnnotation" in str(p.annotation)}
    outputs = {name for name, p in PARAMETERS.items() if "Output" in str(p.annotation)}
    assert (inputs, outputs) == (set(ARTIFACTS), set(OUTPUTS))
    given = {"model": SimpleNamespace(path="/in/model", metadata={"of": "model"}), "seed": 3, "limit": 5}
    request = lm_eval_request(**given, hardware_profile="a100", max_samples=9, skip_unusable_model_source=True)
    assert (request.model.path, request.model.metadata, request.custom_tasks.path) == ("/in/model", {"of": "model"}, "")
    assert (request.harness.seed, request.harness.limit, request.heldout.max_samples) == (3, 5, 9)
    assert (request.remote.hardware_profile, request.load.skip_unusable_model_source) == ("a100", True)
    assert request.eval_dataset.metadata == {} and request.harness.lm_eval_arguments()["limit"] == 5


def test_a_bad_artifact_or_a_missing_argument_is_one_line():
    with pytest.raises(TypeError, match=r"^lm_eval argument model='/models/x': expected a KFP input artifact"):
        build(wrapper_arguments(lm_eval, model="/models/x"))
    arguments = wrapper_arguments(lm_eval)
    del arguments["max_new_tokens"]
    with pytest.raises(TypeError, match=r"^lm_eval: .*\['max_new_tokens'\] are missing") as raised:
        build(arguments)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(("value", "expected"), [("auto", "auto"), ("auto:4", "auto:4"), ("16", 16), (" 8 ", 8)])
def test_batch_size(value, expected):
    assert parse_batch_size(value) == expected


def test_gen_kwargs_are_normalized_so_that_they_win_over_the_tasks():
    assert normalize_gen_kwargs({}) is None
    assert normalize_gen_kwargs({"max_new_tokens": 3}) == {"max_gen_toks": 3}
    assert normalize_gen_kwargs({"max_tokens": 3, "max_gen_toks": 5}) == {"max_tokens": 3, "max_gen_toks": 5}
    assert normalize_gen_kwargs({"temperature": 0.7}) == {"temperature": 0.7, "do_sample": True}
    assert normalize_gen_kwargs({"temperature": 0.7, "do_sample": False}) == {"temperature": 0.7, "do_sample": False}
    assert normalize_gen_kwargs({"temperature": 0}) == {"temperature": 0}


def test_limit_and_num_fewshot_become_lm_evals_arguments():
    assert lm_eval_request().harness.lm_eval_arguments() | {"gen_kwargs": 0} == {
        "batch_size": "auto",
        "limit": None,
        "num_fewshot": None,
        "gen_kwargs": 0,
        "apply_chat_template": True,
        "bootstrap_iters": 100000,
    }
    arguments = lm_eval_request(limit=5, num_fewshot=0, batch_size="16").harness.lm_eval_arguments()
    assert (arguments["limit"], arguments["num_fewshot"], arguments["batch_size"]) == (5, 0, 16)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"max_samples": 0}, "max_samples must be -1 .* got 0"),
        ({"max_new_tokens": 0}, "max_new_tokens must be a positive number of tokens, got 0"),
        ({"bootstrap_iters": -5}, "bootstrap_iters must be >= 0, got -5"),
        ({"limit": 0}, "limit must be .* got 0: it would evaluate nothing"),
        ({"limit": -3}, "limit must be .* got -3"),
        ({"num_fewshot": -2}, "num_fewshot must be .* got -2"),
        *(
            ({"batch_size": bad}, f"batch_size must be .*got {bad!r}")
            for bad in ["0", "-1", "big", "auto:0", "auto:x", ""]
        ),
        ({"gen_kwargs": "temperature=0.7"}, "gen_kwargs must be a dict"),
        ({"backend": "sglang"}, r"backend must be one of \['hf', 'vllm'\], got 'sglang'"),
        ({"model_args": {"peft": "x"}}, r"model_args\['peft'\] is set by the component"),
        ({"eval_backend": "tgis"}, r"eval_backend='tgis': must be one of \['lm-eval', 'lmevaljob', 'evalhub'\]"),
        ({"eval_backend": "evalhub", "pvc_path": "/ws"}, "evalhub_url='': eval_backend='evalhub' needs EvalHub's"),
        ({"eval_backend": "lmevaljob"}, "reads the model and the held-out task from the workspace PVC: pass pvc_path"),
        ({"eval_backend": "lmevaljob", "pvc_path": "/ws", "custom_tasks": "/t"}, "custom_tasks: only eval_backend="),
    ],
)
def test_a_bad_value_names_the_parameter(change, message):
    with pytest.raises(ValueError, match=message):
        lm_eval_request(**change)


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
    message = unknown_task_message(["arc_eazy", "zzz"], ["arc_easy", "arc_challenge", "hellaswag"])
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
