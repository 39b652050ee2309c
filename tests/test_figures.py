"""One source for every figure (issue 48): the documents state what ``docs/figures.json`` holds, the cheap figures are
what the code measures now, and every figure names the script that writes it.

``python scripts/figures.py --write`` re-measures the cheap figures and re-renders the documents; the expensive ones
(demo results, image and set-up sizes and times, GPU runs) are re-measured by their own script's ``--write-figures``.
"""

from __future__ import annotations

import json
import re

import pytest

from benchmarks import component_delivery, demo_figures, house_figures, model_trip, workflow_size
from benchmarks.argo_workflow import RELEASES
from scripts import figures, package_figures


def test_every_marked_figure_is_the_one_in_figures_json():
    assert figures.disagreements(figures.load()) == []


def test_every_figure_names_its_unit_date_commit_and_a_script_that_writes_it():
    recorded = figures.load()
    assert recorded, "docs/figures.json is empty"
    for name, entry in recorded.items():
        assert {"value", "unit", "text", "source", "measured", "commit"} <= set(entry), name
        source = figures.REPO_ROOT / entry["source"]
        assert source.is_file(), f"{name}: its source {entry['source']} does not exist"
        writes = any(word in source.read_text() for word in ("--write-figures", "figures.py --record", "record("))
        assert writes, f"{name}: {entry['source']} does not write figures"


#: Figures a producer records beside the stated ones, machine-readable only: every demo's timings, story and verdict
#: (the README shows SFT's and GRPO's), module counts, every pipeline's parameters, each KFP release's range.
UNSTATED = re.compile(
    r"demo\.(osft|lora|grpo|lora_grpo)\.(wall_seconds|cpu_seconds|load_average|story|story_tail|verdict)"
    r"|house\.(\w+\.)?product_modules|package\.[\w-]+\.parameters|workflow\.expert\.total\.[\d.]+|workflow\.lora\.largest"
)


def test_every_figure_is_stated_somewhere():
    unstated = set(figures.load()) - figures.stated()
    assert sorted(name for name in unstated if not UNSTATED.fullmatch(name)) == []


def test_the_cheap_figures_are_what_the_code_measures_now(shipped_pipeline_yamls, wheel):
    sizes = {
        name: {release: workflow_size.breakdown(workflow_size.model_compiled(path, release)) for release in RELEASES}
        for name, path in shipped_pipeline_yamls.items()
    }
    measured = {
        "benchmarks/house_figures.py": house_figures.figures(),
        "benchmarks/workflow_size.py": workflow_size.figures(sizes),
        "benchmarks/component_delivery.py": component_delivery.spec_figures(),
        "scripts/package_figures.py": package_figures.figures(wheel),
    }
    assert set(measured) == set(figures.cheap_producers())
    assert figures.stale_cheap(figures.load(), measured) == []


def test_a_marker_is_rendered_from_its_figure_and_a_drift_is_named(tmp_path):
    figures_file = tmp_path / "figures.json"
    figures.save(
        {
            "demo.loss": {**figures.figure(2.396, "nats", "2.396"), "measured": "2026-12-06"},
            "demo.table": figures.figure(None, "table", "| a |\n|---|\n| 1 |"),
        },
        figures_file,
    )
    readme = tmp_path / "README.md"
    readme.write_text(
        "loss <!-- fig:demo.loss fmt=.2f -->1.77<!-- /fig --> on <!-- fig:demo.loss fmt=measured -->x<!-- /fig -->\n"
        "<!-- fig:demo.table -->\n| old |\n<!-- /fig -->\n<!-- fig:nowhere -->1<!-- /fig -->\n"
    )
    problems = figures.disagreements(figures.load(figures_file), tmp_path)
    assert problems[0].startswith("README.md:1: demo.loss says '1.77', docs/figures.json says '2.40'")
    assert "README.md:1: demo.loss says 'x'" in problems[1] and "'2026-12-06'" in problems[1]
    assert problems[2].startswith("README.md:2: demo.table says '| old |'")
    assert problems[3].startswith("README.md:5: figure 'nowhere' is not in docs/figures.json")
    assert figures.write_documents(figures.load(figures_file), tmp_path) == [readme]
    assert readme.read_text() == (
        "loss <!-- fig:demo.loss fmt=.2f -->2.40<!-- /fig --> on <!-- fig:demo.loss fmt=measured -->2026-12-06"
        "<!-- /fig -->\n<!-- fig:demo.table -->\n| a |\n|---|\n| 1 |\n<!-- /fig -->\n"
        "<!-- fig:nowhere -->1<!-- /fig -->\n"
    )
    assert len(figures.disagreements(figures.load(figures_file), tmp_path)) == 1  # the unknown name stays named


def test_record_stamps_new_values_and_keeps_unchanged_ones(tmp_path, monkeypatch):
    figures_file = tmp_path / "figures.json"
    monkeypatch.setattr(figures, "commit", lambda: "abc1234")
    figures.record({"a": figures.figure(1, "s"), "b": figures.figure(2, "s")}, "benchmarks/x.py", figures_file)
    stored = json.loads(figures_file.read_text())
    assert stored["a"] == {
        "value": 1,
        "unit": "s",
        "text": "1",
        "source": "benchmarks/x.py",
        "measured": stored["a"]["measured"],
        "commit": "abc1234",
    }
    monkeypatch.setattr(figures, "commit", lambda: "def5678")
    figures.record({"a": figures.figure(1, "s"), "b": figures.figure(3, "s")}, "benchmarks/x.py", figures_file)
    stored = json.loads(figures_file.read_text())
    assert (stored["a"]["commit"], stored["b"]["commit"], stored["b"]["value"]) == ("abc1234", "def5678", 3)


@pytest.mark.parametrize(
    ("assignment", "value", "unit", "text"),
    [
        ("lane.cold.seconds=1,109:s", 1109, "s", "1,109"),
        ("x=2.59:GB", 2.59, "GB", "2.59"),
        ("y=1–2:MB", "1–2", "MB", "1–2"),
    ],
)
def test_shell_scripts_record_name_value_unit(assignment, value, unit, text):
    name, entry = figures.parse_assignment(assignment)
    assert (name, entry["value"], entry["unit"], entry["text"]) == (assignment.split("=")[0], value, unit, text)


def test_the_demos_figures_are_read_from_its_outputs():
    comparison = {
        "heldout_generation/chrf": {"base": 0.0, "tuned": 25.114505},
        "general_sentences/acc": {"base": 1.0, "tuned": 0.275},
    }
    summary = {
        "train-model": {"metrics": {"eval_loss": 2.39634, "base_eval_loss": 7.24648}, "metadata": {}},
        "lm-eval-2": {"metadata": {"results": {"comparison": comparison}}},
    }
    story = "kfp-finetune demo: LORA ...\n  held-out loss 7.246 -> 2.396\n"
    result = {"summary": summary, "wall": 38.26, "cpu": 36.9, "load": 0.9, "story": story, "verdict": "chrF +25.1"}
    found = demo_figures.figures_of("lora", result)
    texts = {name: entry["text"] for name, entry in found.items()}
    assert texts["demo.lora.heldout_loss.base"] == "7.246" and texts["demo.lora.heldout_loss.trained"] == "2.396"
    assert (texts["demo.lora.chrf.base"], texts["demo.lora.chrf.tuned"]) == ("0", "25.1")
    assert (texts["demo.lora.general_acc.base"], texts["demo.lora.general_acc.tuned"]) == ("1.00", "0.28")
    assert texts["demo.lora.verdict"] == "`chrF +25.1`"
    assert texts["demo.lora.story"] == "```text\n$ kfp-finetune demo --algorithm lora\n" + story.rstrip("\n") + "\n```"
    assert figures.rendered(found["demo.lora.heldout_loss.trained"], ".2f", False) == "2.40"


def test_the_model_trips_figures_are_its_table_and_the_after_runs_largest_store_and_disk():
    step = {"store": 700, "workspace": 0, "read": 10**8, "s3": 0, "disk": 700}
    train = {"store": 22_900, "workspace": 10**8, "read": 7_500_000, "s3": 0, "disk": 22_300}
    results = {0.1: {"before": {"train_model": step}, "after": {"train_model": train, "lm_eval (fine-tuned)": step}}}
    found = model_trip.figures(results)
    assert found["trip.table"]["text"] == "\n".join(model_trip.table(results))
    assert found["trip.verdicts"]["text"] == "\n".join(model_trip.verdicts(results))
    assert (found["trip.after.store"]["text"], found["trip.after.disk"]["text"]) == ("23.6", "22.3")
    assert found["trip.after.store_share.0.1"]["text"] == "0.02"
