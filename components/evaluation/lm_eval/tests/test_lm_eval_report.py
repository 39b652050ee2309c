"""lm-eval results as KFP metrics and as the HTML report, with deltas against a baseline."""

import json
import math

import pytest

from components.evaluation.lm_eval.comparison import MetricRow, metric_rows
from components.evaluation.lm_eval.report import kfp_metrics, load_baseline, render_report


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
