"""The demo's figures in the README: ``kfp-finetune demo --algorithm A`` run once per algorithm, its results read back.

For each algorithm the demo runs in ``OUT/<algorithm>`` (its story in ``OUT/<algorithm>/story.txt``), and the figures
are read from its outputs (``pipelines/demo/demo_summary.py``'s ``summarize_run``): the held-out loss the training
step measures (base model -> trained), lm-eval's held-out chrF and ``general_sentences`` accuracy (base ->
fine-tuned), the fine-tuned report's one-line verdict, GRPO's reward windows and gate, the run's wall and CPU seconds
(this process and its children) and the load average after it, and the story itself (the README's transcripts, with
the output directory shown as ``./kfp-finetune-demo``).

``broken_row`` is the README's failing demo (a row cut short), its story and one-line error.

Usage: ``python benchmarks/demo_figures.py [--algorithms sft,osft,lora,grpo,lora_grpo,broken_row] [--out DIR]
[--write-figures]`` from the repository root (a minute or so per algorithm on 2 cores; not run in CI);
``--write-figures`` records them in ``docs/figures.json`` (``scripts/figures.py``).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from pipelines.demo.demo_summary import STEP_TASKS, output_types, summarize_run  # noqa: E402
from scripts.figures import figure, record  # noqa: E402

ALGORITHMS = ("sft", "osft", "lora", "grpo", "lora_grpo")
#: The README's failing demo: the shipped data's first 8 rows with row 5 cut short (as ``tests/test_demo.py``).
BROKEN_ROW = "broken_row"
BROKEN_LINE = '{"messages": [{"role": "user", "content": "hi"}'
#: How the README shows the output directory in a transcript (the demo's default ``--output-dir``).
SHOWN_OUTPUT_DIR = "./kfp-finetune-demo"
_VERDICT = re.compile(r'class="verdict"><strong>[^<]*</strong> ([^<]*)</p>')


def _cpu_seconds() -> float:
    """User + system seconds of this process and its waited-for children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run(algorithm: str, out: Path) -> dict[str, Any]:
    """Runs the demo of ``algorithm`` into ``out``; returns its summary (``summarize_run``) and timings."""
    from pipelines.compile import pipeline_function
    from pipelines.demo.run_demo import run_demo

    story = io.StringIO()
    started, cpu = time.perf_counter(), _cpu_seconds()
    run_demo(out, algorithm=algorithm, out=story)
    wall, cpu = time.perf_counter() - started, _cpu_seconds() - cpu
    text = story.getvalue().replace(str(out.resolve()), SHOWN_OUTPUT_DIR).replace(f"{REPO_ROOT}/", "")
    (out / "story.txt").write_text(text)
    run_dir = max((p for p in (out / "outputs").iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    types = output_types(pipeline_function(algorithm.replace("_", "-")).pipeline_spec)
    reports = sorted(run_dir.glob(f"{STEP_TASKS['eval']}/*.html"))
    verdict = _VERDICT.search(reports[0].read_text()) if reports else None
    return {
        "summary": summarize_run(run_dir, types),
        "wall": wall,
        "cpu": cpu,
        "load": os.getloadavg()[0],
        "story": text,
        "verdict": verdict[1] if verdict else "",
    }


def broken_row_story(out: Path) -> str:
    """The README's failing demo (``kfp-finetune demo --dataset-uri broken_line.jsonl``) as the terminal shows it."""
    from pipelines.demo.demo_data import DEMO_DATASET_PATH
    from pipelines.demo.run_demo import DemoFailed, run_demo

    out.mkdir(parents=True, exist_ok=True)
    rows = Path(DEMO_DATASET_PATH).read_text().splitlines()[:8]
    rows[4] = BROKEN_LINE
    (out / "broken_line.jsonl").write_text("\n".join(rows) + "\n")
    story, failure = io.StringIO(), ""
    cwd = Path.cwd()
    os.chdir(out)  # the README runs it beside the file: the story names it as given
    try:
        run_demo(Path("kfp-finetune-demo"), dataset_uri="broken_line.jsonl", out=story)
    except DemoFailed as error:
        failure = f"kfp-finetune demo: failed: {error}"
    finally:
        os.chdir(cwd)
    text = story.getvalue().replace(str((out / "kfp-finetune-demo").resolve()), SHOWN_OUTPUT_DIR)
    return "$ kfp-finetune demo --dataset-uri broken_line.jsonl\n" + text + failure


def figures_of(algorithm: str, result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The README's figures of one demo run."""
    summary = result["summary"]
    train = summary[STEP_TASKS["train"]]["metrics"]
    prefix = f"demo.{algorithm}"
    found = {
        f"{prefix}.wall_seconds": figure(round(result["wall"], 1), "s", f"{result['wall']:.1f}"),
        f"{prefix}.cpu_seconds": figure(round(result["cpu"], 1), "s", f"{result['cpu']:.1f}"),
        f"{prefix}.load_average": figure(round(result["load"], 1), "load", f"{result['load']:.1f}"),
    }
    story = result["story"].splitlines()
    if "reward_iterations" in train:
        for side in ("first", "last"):
            mean = train[f"reward_{side}_mean"]
            found[f"{prefix}.reward.{side}"] = figure(round(mean, 3), "mean reward", f"{mean:.3f}")
        p_value = train["reward_gate_p_value"]
        found[f"{prefix}.reward.p_value"] = figure(round(p_value, 4), "p", f"{p_value:.3f}")
        passed = "PASSED" if train.get("reward_gate_passed") else "NOT PASSED"
        found[f"{prefix}.reward.gate"] = figure(passed, "")
        first = next(i for i, line in enumerate(story) if "train-model done" in line)
        last = next(i for i, line in enumerate(story) if "reward gate" in line)
        found[f"{prefix}.story_tail"] = figure(
            last + 1 - first, "lines", "```text\n" + "\n".join(story[first : last + 1]) + "\n```"
        )
        return found
    for side, key in (("base", "base_eval_loss"), ("trained", "eval_loss")):
        found[f"{prefix}.heldout_loss.{side}"] = figure(round(train[key], 3), "nats per token", f"{train[key]:.3f}")
    found[f"{prefix}.verdict"] = figure(result["verdict"], "", f"`{result['verdict']}`")
    command = "$ kfp-finetune demo" + ("" if algorithm == "sft" else f" --algorithm {algorithm}")
    found[f"{prefix}.story"] = figure(len(story), "lines", f"```text\n{command}\n" + "\n".join(story) + "\n```")
    metadata = summary[STEP_TASKS["eval"]]["metadata"].values()
    comparison = next(m["comparison"] for m in metadata if "comparison" in m)
    for name, key, digits in (
        ("chrf", "heldout_generation/chrf", ".1f"),
        ("general_acc", "general_sentences/acc", ".2f"),
    ):
        for side in ("base", "tuned"):
            value = comparison[key][side]
            text = "0" if value == 0 and name == "chrf" else format(value, digits)
            found[f"{prefix}.{name}.{side}"] = figure(round(value, 4), "chrF" if name == "chrf" else "accuracy", text)
    return found


def main(argv: list[str] | None = None) -> int:
    """Runs each demo, prints its figures and, with ``--write-figures``, records them after each run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithms", default=",".join((*ALGORITHMS, BROKEN_ROW)))
    parser.add_argument("--out", type=Path, default=None, help="where the runs go (default: a temporary directory)")
    parser.add_argument("--write-figures", action="store_true", help="record the figures in docs/figures.json")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="demo-figures-"))
    for algorithm in args.algorithms.split(","):
        if algorithm == BROKEN_ROW:
            story = broken_row_story(out / algorithm)
            found = {f"demo.{BROKEN_ROW}.story": figure(len(story.splitlines()), "lines", f"```text\n{story}\n```")}
        else:
            found = figures_of(algorithm, run(algorithm, out / algorithm))
        shown = {name: entry["text"] for name, entry in found.items() if "story" not in name}
        print(f"{algorithm}: {json.dumps(shown)}", flush=True)
        if args.write_figures:  # after each run: a later one that fails or is stopped keeps the earlier figures
            record(found, "benchmarks/demo_figures.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
