"""``kfp-finetune demo``, the README's main job: the whole pipeline locally on the tiny model, told in a few lines."""

import json
import math
import re
import shutil
import socket
import tempfile
from pathlib import Path

import pytest

from pipelines.cli import main
from pipelines.compile import pipeline_function
from pipelines.demo.demo_summary import STEP_TASKS, delta_lines, heldout_verdict, output_types, summarize_run
from pipelines.demo.run_demo import demo_arguments
from pipelines.demo.story import one_line_error
from pipelines.demo.tiny_model import GENERAL_TASK, GENERAL_TASK_DIR, general_sentences
from pipelines.training.finetuning.interface import parameter_feeding, pipeline_parameters
from tests.conftest import DEMO_ROWS

#: The README promises a story a newcomer reads at a glance.
MAX_STORY_LINES = 60


@pytest.fixture
def private_tmpdir(tmp_path, monkeypatch):
    """The system temporary directory of this test, to check that the demo leaves nothing behind in it."""
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(system_tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return system_tmp


@pytest.fixture(scope="module")
def taught_base_model(tmp_path_factory) -> tuple[Path, float]:
    """The demo's base model, built and taught once for this module's in-process demo runs, and its last loss."""
    from pipelines.demo.run_demo import DEMO_ENVIRONMENT, build_demo_base_model

    path = tmp_path_factory.mktemp("demo-base-model") / "base-model"
    with pytest.MonkeyPatch.context() as patch:
        for name, value in DEMO_ENVIRONMENT.items():
            patch.setenv(name, value)
        return path, build_demo_base_model(path)


@pytest.fixture
def prebuilt(taught_base_model, monkeypatch):
    """The in-process demo copies :func:`taught_base_model` instead of building its own (the LoRA demo builds one)."""
    built, loss = taught_base_model

    def copy(path: Path) -> float:
        shutil.copytree(built, path, dirs_exist_ok=True)
        return loss

    monkeypatch.setattr("pipelines.demo.run_demo.build_demo_base_model", copy)


@pytest.mark.slow
def test_lora_demo_tells_a_short_story_and_improves_on_the_base_model(lora_demo):
    """``kfp-finetune demo --algorithm lora`` on ``DEMO_ROWS`` rows (a modelcar to a local ``docker-registry`` where
    the tools are here), run by ``tests/conftest.py`` in the background from the first test of ``tests/``."""
    run = lora_demo.wait()
    assert run.returncode == 0, (run.stdout[-2000:], run.stderr[-2000:])
    output_dir, modelcar, private_tmpdir = lora_demo.output_dir, lora_demo.modelcar, lora_demo.tmpdir
    lines = run.stdout.splitlines()
    # The run's story: registration (skipped: no registry given) -> modelcar -> served endpoint (no cluster).
    (published,) = [line for line in lines if line.startswith("  modelcar:   ")]
    if modelcar:
        assert re.match(r"^  modelcar:   oci://127\.0\.0\.1:\d+/demo/tiny@sha256:[0-9a-f]{64}$", published), published
    else:
        assert published == "  modelcar:   skipped" and any(line.startswith("  modelcar: skipped (") for line in lines)
    assert "  deployment: skipped: no cluster" in "\n".join(lines)
    assert len(lines) <= MAX_STORY_LINES, run.stdout
    assert "executor_input" not in run.stdout and "Traceback" not in run.stdout + run.stderr
    for task in STEP_TASKS.values():  # one line when each step starts, one with its duration when it ends
        assert sum(line.endswith(f"] {task} started") for line in lines) == 1
        assert sum(f"] {task} done in " in line for line in lines) == 1
    progress = [line for line in lines if "train-model: step " in line]
    assert 1 <= len(progress) <= 8 and progress[-1].strip().startswith("train-model: step 72/72")

    # The executor chatter went to the log file the story names.
    log = output_dir / "demo.log"
    assert f"full output of every step: {log}" in run.stdout
    assert "executor_input" in log.read_text()

    (run_dir,) = (output_dir / "outputs").iterdir()
    pipeline = pipeline_function("lora")
    summary = summarize_run(run_dir, output_types(pipeline.pipeline_spec))
    assert set(summary) == set(STEP_TASKS.values())
    data = summary["dataset-download"]["metrics"]
    assert (data["rows_valid"], data["rows_rejected"], data["train_rows"], data["eval_rows"]) == (DEMO_ROWS, 0, 72, 8)
    train = summary["train-model"]["metrics"]
    # LoRA learns visibly: held-out loss well below the base model's, and the summary says it improved.
    assert train["eval_loss"] < train["base_eval_loss"] - 2.0, train
    assert heldout_verdict(train)[0] is True and "improved" in run.stdout and "did NOT improve" not in run.stdout
    assert train["steps"] == 8 * math.ceil(72 / 8)  # num_epochs x ceil(train rows / batch)
    vocabulary = json.loads((output_dir / "base-model" / "config.json").read_text())["vocab_size"]
    assert train["final_loss"] < math.log(vocabulary) - 1.0

    # Every report is linked, exists, and carries the extension its KFP type renders with.
    listed = lines[lines.index("reports:") + 1 :]
    reports = [line.split(": ", 1)[1] for line in listed if line.startswith("  ")]
    assert sorted(Path(r).suffix for r in reports) == [".html", ".html", ".html", ".md", ".md"]
    assert all(Path(report).is_file() for report in reports)
    # Numbers agree: lm-eval evaluated every held-out conversation the split has.
    lm_eval_report = next(Path(r) for r in reports if "/lm-eval/" in r).read_text()
    assert "8 of 8 conversations" in lm_eval_report
    # Paths in the training report exist after the run (the workspace is gone, the model artifact stays).
    (model_uri,) = summary["train-model"]["models"].values()
    model_output = json.loads((run_dir / "train-model" / "executor_output.json").read_text())
    (checkpoint,) = [
        a["artifacts"][0]["metadata"]["checkpoint_path"]
        for a in model_output["artifacts"].values()
        if a["artifacts"][0]["uri"] == model_uri
    ]
    assert checkpoint == model_uri and Path(checkpoint, "model.safetensors").is_file()
    assert checkpoint in next(Path(r) for r in reports if "/train-model/" in r).read_text()
    assert summary["model-registry"]["parameters"]["status"] == "skipped"
    assert not (output_dir / "tmp").exists() and list(private_tmpdir.iterdir()) == []

    # The base model was evaluated before training on the same tasks, and its results fed the tuned evaluation:
    # the story prints base -> fine-tuned for the held-out split and for the general-ability task, and whether the
    # model forgot, in agreement with the Metrics the fine-tuned evaluation logged.
    base, tuned = summary[STEP_TASKS["base_eval"]]["metrics"], summary[STEP_TASKS["eval"]]["metrics"]
    for metric in ("heldout_generation/chrf", f"{GENERAL_TASK}/acc"):
        assert tuned[f"{metric}/base"] == base[metric]
        assert tuned[f"{metric}/delta"] == pytest.approx(tuned[metric] - base[metric])
    assert base[f"{GENERAL_TASK}/acc"] >= 0.9  # the base model was taught the general sentences
    assert tuned["heldout_generation/chrf/delta"] > 0  # and learned the new task
    general = next(line for line in lines if line.strip().startswith(f"{GENERAL_TASK} acc"))
    assert f"{base[f'{GENERAL_TASK}/acc']:.2f} -> {tuned[f'{GENERAL_TASK}/acc']:.2f}" in general
    chrf = next(line for line in lines if line.strip().startswith("held-out chrF"))
    assert f"-> {tuned['heldout_generation/chrf']:.3g} (+" in chrf
    comparison = next(m["comparison"] for m in summary[STEP_TASKS["eval"]]["metadata"].values() if "comparison" in m)
    forgot = (
        comparison[f"{GENERAL_TASK}/acc"]["change"] == "worse" and comparison[f"{GENERAL_TASK}/acc"]["beyond_noise"]
    )
    (story,) = [line for line in lines if line.startswith("  forgetting: ")]
    assert story.startswith("  forgetting: YES" if forgot else "  forgetting: none beyond noise"), story
    print("\n".join(line for line in lines if "->" in line or "forgetting" in line))  # the figures, for the record


@pytest.mark.slow
def test_broken_dataset_line_ends_the_demo_with_the_steps_one_line_error(tmp_path, private_tmpdir, capsys, prebuilt):
    rows = Path("pipelines/demo/data/demo_chat.jsonl").read_text().splitlines()[:8]
    rows[4] = '{"messages": [{"role": "user", "content": "hi"}'
    broken = tmp_path / "broken_line.jsonl"
    broken.write_text("\n".join(rows) + "\n")
    output_dir = tmp_path / "demo"
    assert main(["demo", "--dataset-uri", str(broken), "--output-dir", str(output_dir)]) == 1
    printed = capsys.readouterr()
    assert len(printed.out.splitlines()) <= MAX_STORY_LINES
    failed = printed.out.splitlines()[-1]
    assert "dataset-download FAILED after" in failed and str(output_dir / "demo.log") in failed
    last = printed.err.strip().splitlines()[-1]
    failure = "kfp-finetune demo: failed: dataset-download: DatasetValidationError: Expected chat format: 1 of 8 rows"
    assert last.startswith(failure), last
    assert "broken_line.jsonl:5 [invalid_json]" in last
    assert "Traceback" in (output_dir / "demo.log").read_text()  # the whole story stays in the log
    assert not (output_dir / "tmp").exists() and list(private_tmpdir.iterdir()) == []


@pytest.fixture
def online(monkeypatch):
    """The test suite's offline switches lifted (the Hub is the stub on 127.0.0.1)."""
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.slow
def test_demo_downloads_a_hub_dataset_when_the_hub_answers_and_not_when_offline(
    tmp_path, private_tmpdir, capsys, hub_stub, online, prebuilt
):
    """The guide's Quick Start dataset id, served by the Hub stub; a broken row keeps the run short."""
    rows = Path("pipelines/demo/data/demo_chat.jsonl").read_text().splitlines()[:8]
    rows[4] = '{"text": "not chat"}'
    hub_stub.add("LipengCS/Table-GPT", {"All/train.jsonl": ("\n".join(rows) + "\n").encode()})
    output_dir = tmp_path / "demo"
    argv = ["demo", "--dataset-uri", "LipengCS/Table-GPT:All", "--output-dir", str(output_dir)]
    assert main(argv) == 1
    printed = capsys.readouterr()
    assert f"  online: the dataset comes from {hub_stub.url}" in printed.out.splitlines()
    assert any(method == "GET" and path.endswith("/All/train.jsonl") for method, path, _ in hub_stub.requests)
    last = printed.err.strip().splitlines()[-1]
    assert "Expected chat format: 1 of 8 rows of LipengCS/Table-GPT:All" in last, last
    assert "[missing_field] messages field not found" in last, last
    # --offline: nothing is asked of the Hub, and the dataset step says offline mode is on.
    hub_stub.requests.clear()
    assert main([*argv, "--offline"]) == 1
    printed = capsys.readouterr()
    assert "  offline: asked for (--offline)" in printed.out.splitlines()
    assert "offline mode is on" in printed.err.strip().splitlines()[-1]
    assert hub_stub.requests == []


def test_demo_goes_offline_only_when_asked_or_without_a_hub(hub_stub, online, monkeypatch):
    from pipelines.demo.run_demo import offline_reason

    assert offline_reason("org/chat", offline=False) == ""  # the stub answers (404 is an answer)
    assert offline_reason("org/chat", offline=True) == "asked for (--offline)"
    assert offline_reason("org/chat", False, {"HF_HUB_OFFLINE": "1"}) == "asked for (HF_HUB_OFFLINE is set)"
    assert offline_reason("pipelines/demo/data/demo_chat.jsonl", False).startswith("nothing to download")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    reason = offline_reason("org/chat", False, {"HF_ENDPOINT": closed})
    assert reason.startswith(f"the Hub at {closed} does not answer"), reason


@pytest.mark.slow
def test_grpo_demo_shows_the_mean_reward_rising_and_the_gates_decision(tmp_path, private_tmpdir, capsys, prebuilt):
    """``kfp-finetune demo --algorithm grpo``: the toy arithmetic prompts, TRL's GRPO on the tiny model, the gate."""
    output_dir = tmp_path / "demo"
    assert main(["demo", "--algorithm", "grpo", "--output-dir", str(output_dir)]) == 0
    printed = capsys.readouterr()
    lines = printed.out.splitlines()
    assert len(lines) <= MAX_STORY_LINES and "Traceback" not in printed.out + printed.err
    (curve,) = [line for line in lines if line.startswith("  mean reward per iteration: ")]
    rewards = [float(value) for value in curve.split(": ", 1)[1].split()]
    assert len(rewards) == 20 and sum(rewards[-5:]) / 5 > sum(rewards[:5]) / 5 + 0.1, rewards
    (gate,) = [line for line in lines if line.startswith("  reward gate ")]
    decision = r"^  reward gate PASSED: last 5 iterations 0\.\d{3} vs first 5 0\.\d{3} \(gain \+0\.\d{3} "
    assert re.match(decision, gate), gate
    (run_dir,) = (output_dir / "outputs").iterdir()
    pipeline = pipeline_function("grpo")
    summary = summarize_run(run_dir, output_types(pipeline.pipeline_spec))
    assert set(summary) == {"dataset-download", "train-model", "model-registry"}
    train = summary["train-model"]["metrics"]
    assert train["reward_gate_passed"] == 1.0 and train["reward_gate_p_value"] < 0.05 and train["reward_gain"] > 0
    assert f"p={train['reward_gate_p_value']:.4f}" in gate
    assert summary["model-registry"]["parameters"]["status"] == "skipped"
    assert not (output_dir / "tmp").exists() and list(private_tmpdir.iterdir()) == []


def test_one_line_error_is_the_last_exception_of_the_output():
    lines = [
        "[lm_eval] model /x",
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in <module>',
        "    raise KeyError('x')",
        "KeyError: 'x'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "b.py", line 2, in <module>',
        "pkg.mod.EvalDatasetError: eval_dataset /d.jsonl:3: the last turn must be the assistant's",
        "second line of the message",
    ]
    assert one_line_error(lines) == "EvalDatasetError: eval_dataset /d.jsonl:3: the last turn must be the assistant's"
    assert one_line_error(["Killed", ""]) == "Killed"
    assert one_line_error([]) == ""


def test_heldout_verdict_flags_a_run_that_did_not_improve():
    assert heldout_verdict({"eval_loss": 2.0, "base_eval_loss": 6.0})[0] is True
    improved, line = heldout_verdict({"eval_loss": 6.1, "base_eval_loss": 6.0})
    assert improved is False and line.startswith("WARNING") and "did NOT improve" in line
    assert heldout_verdict({"eval_loss": float("nan"), "base_eval_loss": 6.0})[0] is False
    assert heldout_verdict({"final_loss": 1.0})[0] is None


def test_demo_arguments_are_valid_pipeline_parameters(tmp_path):
    for algorithm in ("sft", "osft", "lora", "grpo", "lora_grpo"):
        pipeline = pipeline_function(algorithm.replace("_", "-"))
        arguments = demo_arguments(algorithm, tmp_path / "model", "data.jsonl", "")
        assert set(arguments) <= {p.name for p in pipeline_parameters(pipeline)} and json.dumps(arguments)
        assert arguments[parameter_feeding(pipeline, "train", "training_launcher")] == "local"
        length = ("training_grpo_iterations", 20) if "grpo" in algorithm else ("training_num_epochs", 8)
        assert arguments[parameter_feeding(pipeline, "train", length[0])] == length[1]
    lora, pipeline = demo_arguments("lora", tmp_path / "model", "data.jsonl", ""), pipeline_function("lora")
    rank, alpha = (parameter_feeding(pipeline, "train", name) for name in ("training_lora_r", "training_lora_alpha"))
    assert (lora[rank], lora[alpha]) == (8, 64)
    # the demo's local general-ability task
    assert lora[parameter_feeding(pipeline, "eval", "task_names")] == [str(GENERAL_TASK_DIR)]


def test_general_ability_task_ships_with_the_demo():
    from components.evaluation.lm_eval.custom_task import declared_tasks, is_task_dir

    assert is_task_dir(str(GENERAL_TASK_DIR)) and declared_tasks(GENERAL_TASK_DIR) == [GENERAL_TASK]
    rows = [json.loads(line) for line in (GENERAL_TASK_DIR / f"{GENERAL_TASK}.jsonl").read_text().splitlines()]
    assert len(rows) == len(general_sentences()) == 40
    for row in rows:  # four distinct endings, one of them the sentence's own
        assert len(set(row["choices"])) == 4 and 0 <= row["answer"] < 4


def _record(task: str, metric: str, base: float, tuned: float, beyond_noise: bool | None, change: str) -> dict:
    return dict(
        task=task, metric=metric, base=base, tuned=tuned, delta=tuned - base, beyond_noise=beyond_noise, change=change
    )


def test_delta_lines_say_whether_the_model_forgot():
    chrf = _record("heldout_generation", "chrf", 0.0, 34.3, True, "better")
    forgot = {"heldout_generation/chrf": chrf, "general/acc": _record("general", "acc", 1.0, 0.225, True, "worse")}
    lines = delta_lines(forgot)
    assert "    held-out chrF            0 -> 34.3 (+34.3, better)" in lines
    assert "    general acc              1.00 -> 0.23 (-77.5 pts, worse)" in lines
    assert lines[-1] == (
        "  forgetting: YES, the fine-tuned model forgot what the base model could do (general acc -77.5 pts, worse)"
    )
    kept = {**forgot, "general/acc": _record("general", "acc", 1.0, 0.95, False, "worse")}
    assert delta_lines(kept)[-1] == "  forgetting: none beyond noise on general"
    unsure = {**forgot, "general/acc": _record("general", "acc", 1.0, 0.95, None, "worse")}
    assert delta_lines(unsure)[-1].startswith("  forgetting: maybe, general acc got worse")
    assert delta_lines({}) == ["  base -> fine-tuned: not compared (the base model was not evaluated)"]


def test_console_tells_task_boundaries_throttles_progress_and_keeps_chatter_in_the_log(tmp_path):
    """The story from fake tasks that print what kfp.local prints (its log lines, 4-space indent, step lines)."""
    import io

    from pipelines.demo.story import DemoConsole

    cyan, green, end = "\x1b[96m", "\x1b[92m", "\x1b[0m"

    def fake_task(name: str, fails: bool = False) -> None:
        print(f"12:00:01.001 - INFO - Executing task {cyan}'{name}'{end}")
        print("    [KFP Executor] Got executor_input: {...}")
        for step in range(1, 101):
            print(f"    step {step}/100 epoch 0.5 loss {5 - step / 50:.4f} lr 0.001")
        if fails:
            print("    Traceback (most recent call last):")
            print('      File "x.py", line 1, in <module>')
            print("    ValueError: train_model parameter x=1: must be 2")
            print("    second line")
            raise RuntimeError(f"Task {name!r} finished with status FAILURE")  # raise_on_error: no end line
        print(f"12:00:02.002 - INFO - Task {cyan}'{name}'{end} finished with status {green}SUCCESS{end}")

    for verbose in (False, True):
        out = io.StringIO()
        console = DemoConsole(tmp_path / f"demo-{verbose}.log", out=out, verbose=verbose)
        with pytest.raises(RuntimeError), console.capture(task_count=2):
            fake_task("train-model")
            fake_task("broken", fails=True)
        console.close()
        story = out.getvalue().splitlines()
        if not verbose:
            assert story[0] == "[1/2] train-model started" and story[5].startswith("[1/2] train-model done in ")
            assert [line.split(": ")[1].split(" (")[0] for line in story[1:5]] == [
                f"step {n}/100" for n in (25, 50, 75, 100)
            ]
            assert story[-1].startswith("[2/2] broken FAILED after") and "executor_input" not in out.getvalue()
        else:
            assert "    [KFP Executor] Got executor_input: {...}" in story and len(story) > 200
        assert console.failure == ("broken", "ValueError: train_model parameter x=1: must be 2")
        assert "Got executor_input" in (tmp_path / f"demo-{verbose}.log").read_text()
