"""The continual-learning gate on ``lm_eval``'s comparison records, alone and in the step."""

import math

import pytest

from components.deployment.kubeflow_model_registry.gates import evaluate_delta_gate, improvement, regression
from components.deployment.kubeflow_model_registry.lineage import ArtifactInfo
from components.deployment.kubeflow_model_registry.tests.registry_runs import TOKEN, metrics, properties, register


def _record(task: str, metric: str, base: float, tuned: float, higher: bool | None = True, stderr=0.01) -> dict:
    delta = tuned - base
    return {
        "task": task,
        "metric": metric,
        "base": base,
        "tuned": tuned,
        "delta": delta,
        "stderr": stderr,
        "beyond_noise": None if stderr is None else abs(delta) > stderr,
        "higher_is_better": higher,
        "change": "",
    }


def _comparison(arc_tuned: float = 0.70, chrf_tuned: float = 58.4) -> dict:
    records = [
        _record("heldout_generation", "chrf", 40.2, chrf_tuned, stderr=1.5),
        _record("heldout_perplexity", "token_perplexity", 40.0, 7.0, higher=False, stderr=None),
        _record("arc_easy", "acc", 0.72, arc_tuned),
        _record("arc_easy", "acc_norm", 0.68, 0.69),
        _record("wikitext", "word_perplexity", 20.0, 21.0, higher=False, stderr=None),
    ]
    return {f"{r['task']}/{r['metric']}": r for r in records}


def _results(comparison: dict | None = None, **metadata) -> ArtifactInfo:
    if comparison is not None:
        metadata["comparison"] = comparison
        metadata.setdefault("verdict", "held-out chrF +18.2 (better); arc_easy acc \u22122.0 pts (worse)")
    return ArtifactInfo("file:///results", "/tmp/results", metadata)


def _register(stub, tmp_path, model, **gate):
    eval_metrics = metrics(**{"heldout_generation/chrf": 58.4, "arc_easy/acc": 0.70})
    return register(stub, tmp_path, model, eval_metrics=eval_metrics, **gate)


def test_improvement_and_regression_follow_each_metrics_direction():
    comparison = _comparison()
    assert improvement(comparison["heldout_generation/chrf"]) == pytest.approx(18.2)
    assert improvement(comparison["heldout_perplexity/token_perplexity"]) == pytest.approx(33.0)  # lower is better
    assert regression(comparison["arc_easy/acc"], relative=False) == pytest.approx(0.02)
    assert regression(comparison["arc_easy/acc"], relative=True) == pytest.approx(0.02 / 0.72)
    assert regression(comparison["arc_easy/acc_norm"], relative=False) == 0.0  # it improved
    assert regression(comparison["wikitext/word_perplexity"], relative=True) == pytest.approx(0.05)
    assert regression(_record("t", "m", 0.0, -1.0), relative=True) == math.inf
    assert improvement(_record("t", "m", 1.0, 2.0, higher=None)) is None


def test_without_a_gate_every_comparison_is_listed_and_nothing_fails():
    decision = evaluate_delta_gate(_comparison(), "", 0.0, -1.0, False)
    assert decision.passed and decision.reasons == ()
    assert [(c.name, c.role, c.verdict) for c in decision.checks][:3] == [
        ("heldout_generation/chrf", "new task", ""),
        ("heldout_perplexity/token_perplexity", "new task", ""),
        ("arc_easy/acc", "regression", ""),
    ]
    assert evaluate_delta_gate(None, "", 0.0, -1.0, False).passed  # no comparison needed without a gate


def test_regression_gate_absolute_and_relative():
    # arc_easy acc lost 2 points; wikitext word perplexity rose by 1.0 (5 % of 20).
    assert evaluate_delta_gate(_comparison(), "", 0.0, 1.0, False).passed
    strict = evaluate_delta_gate(_comparison(), "", 0.0, 0.015, False)
    assert not strict.passed
    assert strict.failures == (
        "regressed beyond max_regression 0.015: arc_easy/acc worse by 0.02, wikitext/word_perplexity worse by 1",
    )
    relative = evaluate_delta_gate(_comparison(), "", 0.0, 0.025, True)
    assert relative.failures == (
        "regressed beyond max_regression 2.5% of the base value: arc_easy/acc worse by 2.8%, "
        "wikitext/word_perplexity worse by 5.0%",
    )
    assert evaluate_delta_gate(_comparison(), "", 0.0, 0.04, True).failures == (
        "regressed beyond max_regression 4.0% of the base value: wikitext/word_perplexity worse by 5.0%",
    )
    assert evaluate_delta_gate(_comparison(), "", 0.0, 0.05, True).passed
    # held-out metrics measure the new task: a worse held-out perplexity is never a "regression"
    worse_heldout = {
        **_comparison(),
        "heldout_perplexity/token_perplexity": _record("heldout_perplexity", "p", 7, 70, False),
    }
    assert evaluate_delta_gate(worse_heldout, "", 0.0, 1.0, False).passed


def test_improvement_gate_and_its_task_is_not_a_regression():
    assert evaluate_delta_gate(_comparison(), "heldout_generation/chrf", 18.0, -1.0, False).passed
    short = evaluate_delta_gate(_comparison(), "heldout_generation/chrf", 20.0, -1.0, False)
    assert short.failures == ("heldout_generation/chrf improved by +18.2 (< min_improvement 20)",)
    # A custom task as the new task: its other metrics are exempt from the regression gate.
    decision = evaluate_delta_gate(_comparison(arc_tuned=0.5), "arc_easy/acc_norm", 0.0, 0.0, False)
    assert {c.name: c.role for c in decision.checks}["arc_easy/acc"] == "new task"  # lost 22 points, exempt
    assert decision.failures == ("regressed beyond max_regression 0: wikitext/word_perplexity worse by 1",)


def test_misconfigured_gates_are_errors_not_silent_decisions():
    with pytest.raises(ValueError, match="'heldout_generation/chrF' is not among the compared metrics"):
        evaluate_delta_gate(_comparison(), "heldout_generation/chrF", 0.0, -1.0, False)
    with pytest.raises(ValueError, match=r"there is none \(the base model was not evaluated: turned off\)"):
        evaluate_delta_gate({}, "", 0.0, 0.02, False, "the base model was not evaluated: turned off")
    with pytest.raises(ValueError, match="max_regression must be a finite number"):
        evaluate_delta_gate(_comparison(), "", 0.0, math.nan, False)


def test_gate_passes_registers_with_the_deltas_recorded(registry_stub, tmp_path, model, capsys):
    registry_stub.require_token(TOKEN)
    result = _register(
        registry_stub,
        tmp_path,
        model,
        eval_results=_results(_comparison()),
        min_improvement_metric="heldout_generation/chrf",
        min_improvement=5.0,
        max_regression=0.06,  # arc_easy acc lost 2.8 %, wikitext's perplexity rose 5 %
        max_regression_relative=True,
    )
    assert result.status == "registered"
    [version] = registry_stub.model_versions.values()
    props = properties(version)
    assert props["eval.heldout_generation/chrf"] == 58.4
    assert props["eval.heldout_generation/chrf/base"] == 40.2
    assert props["eval.heldout_generation/chrf/delta"] == pytest.approx(18.2)
    assert props["eval.arc_easy/acc/delta"] == pytest.approx(-0.02)
    assert props["eval.verdict"].startswith("held-out chrF +18.2")
    log = capsys.readouterr().out
    assert "gate: heldout_generation/chrf improved by +18.2 (>= min_improvement 5)" in log
    assert "gate: no other task regressed beyond max_regression 6.0% of the base value" in log
    summary = (tmp_path / "summary.md").read_text()
    assert "## Base model → fine-tuned" in summary
    assert "| arc_easy/acc | 0.72 | 0.7 | -0.02 | 0.01 | yes | regression: ok |" in summary
    assert "| heldout_generation/chrf | 40.2 | 58.4 | +18.2 | 1.5 | yes | improvement: ok |" in summary


def test_gated_out_model_is_reported_not_registered(registry_stub, tmp_path, model, capsys):
    result = _register(
        registry_stub,
        tmp_path,
        model,
        eval_results=_results(_comparison(arc_tuned=0.60)),
        min_improvement_metric="heldout_generation/chrf",
        min_improvement=5.0,
        max_regression=0.1,  # arc_easy acc lost 0.12 of 0.72 (16.7 %), wikitext's perplexity rose 5 %
        max_regression_relative=True,
    )
    assert (result.status, result.model_id, result.version_id) == ("gated_out", "", "")
    assert result.reason == (
        "gate not met: regressed beyond max_regression 10.0% of the base value: arc_easy/acc worse by 16.7%"
    )
    assert registry_stub.requests == [] and registry_stub.model_versions == {}
    assert f"gated out (not registered): {result.reason}" in capsys.readouterr().out
    summary = (tmp_path / "summary.md").read_text()
    assert "**Status:** `gated_out`" in summary and "arc_easy/acc worse by 16.7%" in summary
    assert "| arc_easy/acc | 0.72 | 0.6 | -0.12 | 0.01 | yes | regression: FAILED |" in summary
    assert "| arc_easy/acc_norm | 0.68 | 0.69 | +0.01 | 0.01 | no (within noise) | regression: ok |" in summary


def test_gate_without_a_base_model_evaluation_says_why(registry_stub, tmp_path, model):
    skipped = _results(baseline_skipped="model_source 'oci://quay.io/x/y:1' is a oci:// URI; ...")
    with pytest.raises(ValueError, match="base model was not evaluated: model_source 'oci://quay.io/x/y:1'"):
        _register(registry_stub, tmp_path, model, eval_results=skipped, max_regression=0.02)
    with pytest.raises(ValueError, match="eval_results is not wired"):
        _register(registry_stub, tmp_path, model, min_improvement_metric="heldout_generation/chrf")
    assert registry_stub.requests == [] and not (tmp_path / "summary.md").exists()


def test_the_evaluated_model_is_recorded_in_the_lineage(registry_stub, tmp_path, model):
    """Which model the evaluation evaluated, where and on which backend (issue 46) become eval.* properties."""
    registry_stub.require_token(TOKEN)
    digest = "sha256:" + "c" * 64
    evaluated = {
        "eval_backend": "lmevaljob",
        "evaluated_model_location": "/opt/app-root/src/hf_home/train_model/run-1/final",
        "evaluated_model_digest": digest,
        "hardware_profile": "a100-queued",
    }
    result = _register(registry_stub, tmp_path, model, eval_results=_results(_comparison(), **evaluated))
    assert result.status == "registered"
    [version] = registry_stub.model_versions.values()
    props = properties(version)
    assert {key: props[f"eval.{key}"] for key in evaluated} == evaluated
