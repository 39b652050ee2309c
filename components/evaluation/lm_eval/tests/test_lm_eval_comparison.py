"""lm-eval results as KFP metrics, the fine-tuned model against the base (deltas, noise, verdict), the HTML report."""

import json
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
from components.evaluation.lm_eval.report import kfp_metrics, load_baseline, render_report


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


def _results(acc: float, loss: float, gsm_strict: float = 0.5) -> dict:
    """A results dict in lm-eval's layout: values, stderr (or N/A), filters, directions, sample counts."""
    return {
        "results": {
            "arc_easy": {
                "alias": "arc_easy",
                "acc,none": acc,
                "acc_stderr,none": 0.01,
                "acc_norm,none": acc - 0.1,
                "acc_norm_stderr,none": "N/A",
            },
            "gsm8k": {"exact_match,strict-match": gsm_strict, "exact_match_stderr,strict-match": 0.02},
            "heldout_perplexity": {"token_loss,none": loss, "token_perplexity,none": math.exp(loss)},
            "broken": {"word_perplexity,none": float("inf")},
        },
        "higher_is_better": {
            "arc_easy": {"acc": True, "acc_norm": True},
            "gsm8k": {"exact_match": True},
            "heldout_perplexity": {"token_loss": False, "token_perplexity": False},
        },
        "n-samples": {"arc_easy": {"original": 2376, "effective": 100}},
        "config": {"model_args": {"pretrained": "base-model"}},
    }


def test_metric_names():
    assert MetricRow("arc_easy", "acc", "none", 0.5, None, True).name == "arc_easy/acc"
    assert MetricRow("gsm8k", "exact_match", "strict-match", 0.5, None, True).name == "gsm8k/exact_match/strict-match"


def test_metric_rows_and_kfp_metrics():
    rows = metric_rows(_results(0.6, 2.0))
    assert [(r.task, r.metric, r.filter_name) for r in rows] == [
        ("arc_easy", "acc", "none"),
        ("arc_easy", "acc_norm", "none"),
        ("gsm8k", "exact_match", "strict-match"),
        ("heldout_perplexity", "token_loss", "none"),
        ("heldout_perplexity", "token_perplexity", "none"),
        ("broken", "word_perplexity", "none"),
    ]
    assert rows[1].stderr is None and rows[3].higher_is_better is False and rows[5].higher_is_better is None
    assert kfp_metrics(rows) == {
        "arc_easy/acc": 0.6,
        "arc_easy/acc_stderr": 0.01,
        "arc_easy/acc_norm": pytest.approx(0.5),
        "gsm8k/exact_match/strict-match": 0.5,
        "gsm8k/exact_match/strict-match_stderr": 0.02,
        "heldout_perplexity/token_loss": 2.0,
        "heldout_perplexity/token_perplexity": pytest.approx(math.exp(2.0)),
    }


def test_report_has_a_table_per_task_and_the_delta_vs_the_baseline():
    page = render_report(_results(0.6, 2.0), {"Model": "<tuned>"}, baseline=_results(0.5, 2.5, gsm_strict=0.5))
    assert page.count("<h2>") == 4
    assert "<h2>arc_easy</h2>\n<p>100 documents</p>" in page
    assert "&lt;tuned&gt;" in page and "<tuned>" not in page
    assert "Base model: base-model." in page  # named, not its model_args dict
    # acc: +0.1 against a stderr of the delta of sqrt(0.01² + 0.01²) = 0.0141: beyond noise, better; a 0-1 metric's
    # delta and its stderr in percentage points, as the verdict line and the demo's summary write them.
    acc_row = (
        "<tr><td>acc</td><td>0.6000</td><td>0.0100</td><td>yes</td><td>0.5000</td><td>+10.0 pts</td><td>1.4 pts</td>"
        "<td>better</td>"
    )
    assert acc_row in page
    loss_row = "<td>token_loss</td><td>2.0000</td><td></td><td>no</td><td>2.5000</td><td>\u22120.5</td><td></td>"
    assert loss_row + "<td>better; no stderr</td>" in page
    assert "<td>exact_match (strict-match)</td><td>0.5000</td>" in page
    assert "<td>+0.0 pts</td><td>2.8 pts</td><td>same" in page
    assert "<td>inf</td><td>nan</td><td></td><td>not comparable</td>" in page  # inf - inf
    # The verdict leads the page: the asked-for tasks' headline metrics, the new (held-out) task first.
    verdict = page.index('<p class="verdict">')
    assert verdict < page.index("<table>")
    assert page[verdict : page.index("</p>", verdict)].endswith(
        "<strong>Base → fine-tuned:</strong> held-out token_perplexity \u22124.8 (better; no stderr); "
        "arc_easy acc +10.0 pts (better); gsm8k exact_match (strict-match) +0.0 pts (same); "
        "broken word_perplexity nan (not comparable)"
    )


@pytest.mark.parametrize(
    ("model_args", "expected"),
    [
        ({"pretrained": "Qwen/Qwen2.5-1.5B-Instruct", "dtype": "auto"}, "Qwen/Qwen2.5-1.5B-Instruct"),
        ("pretrained=/models/base,dtype=bfloat16", "/models/base"),
        ({"pretrained": "base", "peft": "/out/adapter"}, "/out/adapter (PEFT adapter on base)"),
        (None, "(unknown model)"),
    ],
)
def test_the_base_model_is_named(model_args, expected):
    from components.evaluation.lm_eval.report import model_name

    assert model_name(model_args) == expected


def test_report_without_baseline_or_tasks():
    page = render_report(_results(0.6, 2.0), {})
    assert "Base model" not in page and "Δ vs base" not in page and 'class="verdict"' not in page
    assert "No task was evaluated" in render_report({"results": {}}, {})


def test_report_shows_the_first_generations_of_generative_tasks():
    results = {
        "results": {"heldout_generation": {"exact_match,none": 0.0}},
        "samples": {
            "heldout_generation": [
                {"arguments": [["Q<1>", {}]], "target": "A", "filtered_resps": ["gen &"]} for _ in range(9)
            ]
        },
    }
    page = render_report(results, {})
    assert page.count("<td><pre>Q&lt;1&gt;</pre></td><td><pre>A</pre></td><td><pre>gen &amp;</pre></td>") == 5


def test_load_baseline_errors_name_the_file(tmp_path):
    good = tmp_path / "results.json"
    good.write_text(json.dumps(_results(0.5, 2.0)))
    assert load_baseline(good)["results"]["arc_easy"]["acc,none"] == 0.5
    with pytest.raises(ValueError, match="does not exist"):
        load_baseline(tmp_path / "none.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{\n"results": ')
    with pytest.raises(ValueError, match=f"{bad}:2: not valid JSON"):
        load_baseline(bad)
    bad.write_text('{"acc": 1}')
    with pytest.raises(ValueError, match="expected lm-eval results JSON"):
        load_baseline(bad)
