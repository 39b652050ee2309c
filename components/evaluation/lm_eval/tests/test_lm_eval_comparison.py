"""The fine-tuned model against the base model: deltas, the noise test, the Metrics names and the verdict."""

import math

import pytest

from components.evaluation.lm_eval.comparison import (
    VERDICT_TASKS,
    Comparison,
    MetricRow,
    compare,
    compare_with_baseline,
    comparison_metrics,
    metric_rows,
    verdict,
)


def _run(chrf: float, acc: float, acc_stderr: float | None = 0.01, loss: float = 2.0) -> dict:
    """lm-eval results of a held-out run plus arc_easy (the layout ``simple_evaluate`` returns)."""
    arc = {"acc,none": acc, "acc_norm,none": acc}
    if acc_stderr is not None:
        arc["acc_stderr,none"] = acc_stderr
    return {
        "results": {
            "arc_easy": arc,
            "heldout_generation": {"exact_match,none": 0.1, "exact_match_stderr,none": 0.05, "chrf,none": chrf},
            "heldout_perplexity": {"token_loss,none": loss, "token_perplexity,none": math.exp(loss)},
        },
        "higher_is_better": {
            "arc_easy": {"acc": True, "acc_norm": True},
            "heldout_generation": {"exact_match": True, "chrf": True},
            "heldout_perplexity": {"token_loss": False, "token_perplexity": False},
        },
        "config": {"model_args": {"pretrained": "base"}},
    }


def _pair(delta: float, base_se: float | None, tuned_se: float | None, higher: bool | None = True) -> Comparison:
    return Comparison(
        MetricRow("t", "m", "none", 0.5 + delta, tuned_se, higher), MetricRow("t", "m", "none", 0.5, base_se, higher)
    )


def test_the_stderr_of_a_delta_combines_both_runs_and_decides_what_is_noise():
    assert _pair(0.05, 0.03, 0.04).stderr == pytest.approx(0.05)  # sqrt(0.03² + 0.04²)
    assert _pair(0.051, 0.03, 0.04).beyond_noise is True
    assert _pair(-0.049, 0.03, 0.04).beyond_noise is False
    assert _pair(0.02, None, 0.01).stderr == 0.01 and _pair(0.02, None, 0.01).beyond_noise is True
    assert _pair(0.02, None, None).stderr is None and _pair(0.02, None, None).beyond_noise is None


def test_the_change_follows_the_metrics_direction():
    assert _pair(0.1, 0.01, 0.01).change == "better"
    assert _pair(0.1, 0.01, 0.01, higher=False).change == "worse"
    assert _pair(0.0, 0.01, 0.01).change == "same"
    assert _pair(0.1, 0.01, 0.01, higher=None).change == ""


def test_metrics_carry_base_and_delta_beside_each_tuned_metric_both_runs_have():
    tuned, base = _run(chrf=58.4, acc=0.716), _run(chrf=40.2, acc=0.72)
    base["results"]["arc_easy"].pop("acc_norm,none")  # a metric only the tuned run has is not compared
    metrics = comparison_metrics(compare(metric_rows(tuned), metric_rows(base)))
    assert metrics["heldout_generation/chrf/base"] == 40.2
    assert metrics["heldout_generation/chrf/delta"] == pytest.approx(18.2)
    assert metrics["arc_easy/acc/base"] == 0.72 and metrics["arc_easy/acc/delta"] == pytest.approx(-0.004)
    assert "arc_easy/acc_norm/delta" not in metrics and "arc_easy/acc_norm/base" not in metrics
    assert metrics["heldout_perplexity/token_loss/delta"] == 0.0


def test_the_verdict_names_the_new_task_first_then_what_it_cost():
    comparisons = compare(metric_rows(_run(chrf=58.4, acc=0.716)), metric_rows(_run(chrf=40.2, acc=0.72)))
    line = verdict(comparisons, ["arc_easy", "heldout_generation", "heldout_perplexity"])
    # chrF has no stderr here; arc_easy's -0.4 points are within sqrt(2) x 1 point.
    assert line == "held-out chrF +18.2 (better; no stderr); arc_easy acc \u22120.4 pts (within noise)"
    comparisons = compare(
        metric_rows(_run(chrf=58.4, acc=0.5, acc_stderr=0.01)), metric_rows(_run(chrf=40.2, acc=0.72))
    )
    assert verdict(comparisons).endswith("arc_easy acc \u221222.0 pts (worse)")


def test_the_verdict_stays_short_with_many_tasks():
    rows = [MetricRow(f"task{i}", "acc", "none", 0.5, 0.01, True) for i in range(VERDICT_TASKS + 3)]
    line = verdict(compare(rows, rows))
    assert line.count("(same)") == VERDICT_TASKS and line.endswith("and 3 more tasks (see the tables)")


def test_compare_with_baseline_records_the_comparison_or_why_there_is_none():
    metrics, metadata = compare_with_baseline(_run(60.0, 0.7), _run(40.0, 0.7), ["arc_easy", "heldout_generation"])
    assert metrics["heldout_generation/chrf/delta"] == 20.0
    record = metadata["comparison"]["arc_easy/acc"]
    assert record == {
        "task": "arc_easy",
        "metric": "acc",
        "base": 0.7,
        "tuned": 0.7,
        "delta": 0.0,
        "stderr": pytest.approx(math.sqrt(2) * 0.01),
        "beyond_noise": False,
        "higher_is_better": True,
        "change": "same",
    }
    assert metadata["verdict"].startswith("held-out chrF +20.0") and "pretrained" in metadata["baseline_model"]
    assert compare_with_baseline(_run(60.0, 0.7), None, []) == ({}, {})
    skipped = {"results": {}, "skipped": "turned off (enabled is false)"}
    assert compare_with_baseline(_run(60.0, 0.7), skipped, []) == (
        {},
        {"baseline_skipped": "turned off (enabled is false)"},
    )
