"""The lm_eval component run for real on the tiny offline model (each configuration once per module), through
``python_func`` and ``kfp.local``; the held-out per-token loss is recomputed with plain torch."""

import json
import math
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from kfp import dsl

from components.evaluation.lm_eval import lm_eval
from components.evaluation.lm_eval.custom_task import EvalDatasetError, UnknownTaskError
from components.evaluation.lm_eval.model_spec import ModelSourceError
from components.evaluation.lm_eval.run import BenchmarkDataError
from pipelines.demo.demo_data import DEMO_DATASET_PATH

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures"
CUSTOM_TASKS = FIXTURES / "arith_choice"
HELDOUT_ROWS = 6
#: The held-out metrics (``heldout_<task>/<metric>`` without the ``heldout_`` prefix).
HELDOUT_METRICS = ("generation/exact_match", "generation/chrf", "perplexity/token_loss", "perplexity/token_perplexity")
#: Small and fast settings shared by every run.
FAST = {"max_samples": HELDOUT_ROWS, "max_new_tokens": 12, "batch_size": "8", "bootstrap_iters": 200, "seed": 7}


def _train(source: Path, target: Path, steps: int = 80) -> Path:
    """Fine-tunes a copy of the tiny model on demo rows past the held-out ones (assistant tokens only)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModelForCausalLM.from_pretrained(source)
    rows = [json.loads(line)["messages"] for line in DEMO_DATASET_PATH.read_text().splitlines()[40:]]
    encoded = [
        tokenizer.apply_chat_template(m, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
        for m in rows
    ]
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    batch_size = 16
    for step in range(steps):
        batch = [encoded[(step * batch_size + i) % len(encoded)] for i in range(batch_size)]
        width = max(len(e["input_ids"]) for e in batch)
        ids = torch.full((batch_size, width), tokenizer.pad_token_id)
        mask = torch.zeros((batch_size, width), dtype=torch.long)
        labels = torch.full((batch_size, width), -100)
        for i, example in enumerate(batch):
            tokens = torch.tensor(example["input_ids"])
            ids[i, : len(tokens)], mask[i, : len(tokens)] = tokens, 1
            labels[i, : len(tokens)] = torch.where(torch.tensor(example["assistant_masks"]) == 1, tokens, -100)
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


def _expected_token_loss(model, tokenizer, chat: bool, rows: int = HELDOUT_ROWS) -> float:
    """Per-token NLL of the first reference answers, computed with torch alone (not lm-eval)."""
    import torch

    total_nll, total_tokens = 0.0, 0
    for line in DEMO_DATASET_PATH.read_text().splitlines()[:rows]:
        messages = json.loads(line)["messages"]
        *prompt, answer = messages
        if chat:
            context = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
            continuation = answer["content"]
        else:
            turns = [f"{m['role'].capitalize()}: {m['content']}" for m in prompt]
            context, continuation = "\n\n".join([*turns, "Assistant:"]), " " + answer["content"]
        head = tokenizer(context.rstrip(), add_special_tokens=False)["input_ids"]
        whole = tokenizer(context + continuation, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(torch.tensor([whole])).logits[0]
        log_probs = torch.log_softmax(logits[len(head) - 1 : -1].double(), dim=-1)
        total_nll -= log_probs.gather(1, torch.tensor(whole[len(head) :])[:, None]).sum().item()
        total_tokens += len(whole) - len(head)
    return total_nll / total_tokens


@dataclass
class Run:
    """The outputs of one component run."""

    metrics: dict
    results: dict
    results_metadata: dict
    report: str


def _run(
    out: Path, model_dir: Path | None, *, metadata=None, eval_dataset=DEMO_DATASET_PATH, baseline=None, **params
) -> Run:
    """Calls the component's Python function with local artifacts, as the KFP executor would (no model: None)."""
    out.mkdir(parents=True, exist_ok=True)
    metrics = dsl.Metrics(uri=str(out / "metrics"))
    results = dsl.Artifact(uri=str(out / "results.json"))
    report = dsl.HTML(uri=str(out / "report.html"))
    custom = params.pop("custom_tasks", None)
    lm_eval.python_func(
        model=dsl.Model(uri=str(model_dir), metadata=metadata or {}) if model_dir else None,
        metrics=metrics,
        results=results,
        report=report,
        eval_dataset=dsl.Dataset(uri=str(eval_dataset)) if eval_dataset else None,
        baseline_results=dsl.Artifact(uri=str(baseline)) if baseline else None,
        custom_tasks=dsl.Artifact(uri=str(custom)) if custom else None,
        **{**FAST, **params},
    )
    return Run(
        dict(metrics.metadata),
        json.loads(Path(results.path).read_text()),
        dict(results.metadata),
        Path(report.path).read_text(),
    )


@pytest.fixture(scope="module")
def trained_model_dir(tiny_model_dir, tmp_path_factory) -> Path:
    return _train(tiny_model_dir, tmp_path_factory.mktemp("trained") / "model")


@pytest.fixture(scope="module")
def base_run(tiny_model_dir, tmp_path_factory) -> Run:
    """The untrained model as the pipelines' base-model evaluation runs it (``model_source``), no samples logged."""
    return _run(tmp_path_factory.mktemp("base-run"), None, model_source=str(tiny_model_dir), log_samples=False)


@pytest.fixture(scope="module")
def chat_run(trained_model_dir, base_run, tmp_path_factory) -> Run:
    """The fine-tuned model, chat template on: the custom multiple-choice task plus the held-out split."""
    out = tmp_path_factory.mktemp("chat-run")
    baseline = out / "baseline.json"
    baseline.write_text(json.dumps(base_run.results))
    return _run(
        out,
        trained_model_dir,
        task_names=["arith_choice"],
        custom_tasks=CUSTOM_TASKS,
        baseline=baseline,
        log_samples=True,
    )


@pytest.fixture(scope="module")
def plain_run(trained_model_dir, tmp_path_factory) -> Run:
    """The same model and tasks without the chat template; the task directory named in ``task_names``."""
    return _run(
        tmp_path_factory.mktemp("plain-run"),
        trained_model_dir,
        task_names=[str(CUSTOM_TASKS)],
        apply_chat_template=False,
        log_samples=True,
    )


@pytest.fixture(scope="module")
def short_run(trained_model_dir, tmp_path_factory) -> Run:
    """The held-out split with ``gen_kwargs`` capping generation at 3 tokens."""
    return _run(
        tmp_path_factory.mktemp("short-run"), trained_model_dir, gen_kwargs={"max_new_tokens": 3}, log_samples=True
    )


def _generations(run: Run) -> list[str]:
    return [s["filtered_resps"][0] for s in run.results["samples"]["heldout_generation"]]


def _prompts(run: Run, task: str) -> list[str]:
    return [s["arguments"][0][0] for s in run.results["samples"][task]]


def test_metrics_hold_every_task_metric_and_stderr(chat_run):
    assert set(chat_run.metrics) == {
        "arith_choice/acc",
        "arith_choice/acc_stderr",
        "arith_choice/acc_norm",
        "arith_choice/acc_norm_stderr",
        "heldout_generation/exact_match",
        "heldout_generation/exact_match_stderr",
        "heldout_generation/chrf",
        "heldout_generation/chrf_stderr",
        "heldout_perplexity/token_loss",
        "heldout_perplexity/token_perplexity",
        # beside each metric the base model's run has too (arith_choice is not in it): its value and the delta
        *(f"heldout_{name}/{kind}" for name in HELDOUT_METRICS for kind in ("base", "delta")),
    }
    for name, value in chat_run.metrics.items():
        if name.endswith(("/base", "/delta")):
            continue
        task, _, metric = name.partition("/")
        assert chat_run.results["results"][task][f"{metric},none"] == value
    assert chat_run.results["n-samples"]["arith_choice"]["effective"] == 8
    assert chat_run.results["n-samples"]["heldout_generation"]["effective"] == HELDOUT_ROWS
    assert 0 <= chat_run.metrics["arith_choice/acc"] <= 1
    assert 0 <= chat_run.metrics["heldout_generation/chrf"] <= 100
    assert chat_run.results_metadata["tasks"] == ["arith_choice", "heldout_generation", "heldout_perplexity"]
    assert chat_run.results_metadata["heldout_rows"] == HELDOUT_ROWS
    # The report says how many of the split's conversations were evaluated, and why not all of them.
    available = sum(1 for line in DEMO_DATASET_PATH.read_text().splitlines() if line.strip())
    assert chat_run.results_metadata["heldout_rows_available"] == available
    assert f"{HELDOUT_ROWS} of {available} conversations (max_samples={HELDOUT_ROWS})" in chat_run.report


@pytest.mark.parametrize("run_name", ["chat_run", "plain_run"])
def test_heldout_token_loss_matches_an_independent_computation(request, trained_model_dir, run_name):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run = request.getfixturevalue(run_name)
    model = AutoModelForCausalLM.from_pretrained(trained_model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(trained_model_dir)
    expected = _expected_token_loss(model, tokenizer, chat=run_name == "chat_run")
    assert run.metrics["heldout_perplexity/token_loss"] == pytest.approx(expected, rel=1e-4)
    assert run.metrics["heldout_perplexity/token_perplexity"] == pytest.approx(math.exp(expected), rel=1e-3)


def test_fine_tuning_shows_in_the_heldout_scores(chat_run, base_run):
    assert chat_run.metrics["heldout_perplexity/token_loss"] < base_run.metrics["heldout_perplexity/token_loss"] - 1
    assert chat_run.metrics["heldout_generation/chrf"] > base_run.metrics["heldout_generation/chrf"]


def test_chat_template_is_applied_or_not(chat_run, plain_run):
    for prompt in _prompts(chat_run, "heldout_generation") + _prompts(chat_run, "arith_choice"):
        assert prompt.startswith("<|im_start|>") and prompt.endswith("<|im_start|>assistant\n")
    for prompt in _prompts(plain_run, "heldout_generation"):
        assert "<|im_start|>" not in prompt and prompt.startswith(("System: ", "User: "))
        assert prompt.endswith("\n\nAssistant:")
    assert _prompts(plain_run, "arith_choice")[0].startswith("Question: ")
    assert plain_run.metrics["heldout_perplexity/token_loss"] != chat_run.metrics["heldout_perplexity/token_loss"]
    assert "Chat template</th><td>not applied" in plain_run.report
    assert "Chat template</th><td>applied" in chat_run.report


def test_gen_kwargs_change_what_is_generated(chat_run, short_run):
    full, short = _generations(chat_run), _generations(short_run)
    assert len(full) == len(short) == HELDOUT_ROWS
    assert all(f.startswith(s) for f, s in zip(full, short, strict=True))
    assert any(len(s) < len(f) for f, s in zip(full, short, strict=True))
    assert short_run.results["configs"]["heldout_generation"]["generation_kwargs"]["max_gen_toks"] == 3
    assert (
        chat_run.results["configs"]["heldout_generation"]["generation_kwargs"]["max_gen_toks"] == FAST["max_new_tokens"]
    )
    assert "Generation settings</th><td>{&quot;max_gen_toks&quot;: 3}" in short_run.report


def test_report_has_a_table_per_task_and_the_delta_vs_the_baseline(chat_run, base_run):
    report = chat_run.report
    for task in ("arith_choice", "heldout_generation", "heldout_perplexity"):
        assert f"<h2>{task}</h2>" in report
    assert "<th>Δ vs base</th>" in report
    delta = chat_run.metrics["heldout_perplexity/token_loss"] - base_run.metrics["heldout_perplexity/token_loss"]
    assert f"<td>token_loss</td><td>{chat_run.metrics['heldout_perplexity/token_loss']:.4f}</td>" in report
    shown = (f"{delta:+.1f}" if abs(delta) >= 1 else f"{delta:+.3g}").replace("-", "\u2212")  # as the verdict
    assert f"<td>{shown}</td><td></td><td>better; no stderr</td>" in report  # perplexity has no stderr
    assert "<td>acc</td>" in report and "<td>n/a</td>" in report  # arith_choice is not in the baseline
    # The verdict leads the report, and the metadata carries it for the registry gate.
    assert report.index('<p class="verdict">') < report.index("<h2>")
    assert chat_run.results_metadata["verdict"] in report and "held-out chrF " in chat_run.results_metadata["verdict"]
    assert "First generations of heldout_generation" in report
    first = chat_run.results["samples"]["heldout_generation"][0]
    assert f"<td><pre>{first['target']}</pre></td>" in report


def test_log_samples_decides_whether_samples_are_kept(chat_run, base_run):
    assert len(chat_run.results["samples"]["arith_choice"]) == 8
    assert "samples" not in base_run.results
    assert "First generations" in base_run.report  # the report shows examples either way


def test_few_shot_examples_never_include_the_evaluated_conversation(trained_model_dir, tmp_path):
    # Three conversations, two shots: the examples of each one must be exactly the two others.
    run = _run(tmp_path, trained_model_dir, num_fewshot=2, max_samples=3, log_samples=True)
    assert run.results["n-shot"]["heldout_generation"] == 2
    for sample in run.results["samples"]["heldout_perplexity"]:
        prompt, reference = sample["arguments"][0]
        question = sample["doc"]["prompt"]
        assert prompt.count("<|im_start|>assistant\n") == 3  # two answered examples, then the generation prompt
        assert prompt.count(question) == 1 and prompt.endswith(f"{question}<|im_end|>\n<|im_start|>assistant\n")
        assert reference not in prompt


def test_peft_adapter_is_evaluated_on_its_base_from_the_metadata(tiny_model_dir, tmp_path):
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    config = LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    adapter_dir = tmp_path / "adapter"
    get_peft_model(base, config).save_pretrained(adapter_dir)
    adapter_config = json.loads((adapter_dir / "adapter_config.json").read_text())
    adapter_config["base_model_name_or_path"] = "/training-pod/base-model"  # not reachable from here
    (adapter_dir / "adapter_config.json").write_text(json.dumps(adapter_config))

    run = _run(tmp_path / "out", adapter_dir, metadata={"base_model": str(tiny_model_dir)}, limit=3)
    assert run.results["config"]["model_args"]["peft"] == str(adapter_dir)
    assert run.results_metadata["base_model"] == str(tiny_model_dir)
    assert "Base model</th><td>" + str(tiny_model_dir) in run.report

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    fresh_base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with_adapter = PeftModel.from_pretrained(fresh_base, adapter_dir).eval()
    expected = _expected_token_loss(with_adapter, tokenizer, chat=True, rows=3)
    without = _expected_token_loss(AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval(), tokenizer, True, 3)
    assert run.metrics["heldout_perplexity/token_loss"] == pytest.approx(expected, rel=1e-4)
    assert abs(expected - without) > 1e-3  # the adapter really changes the model


def test_runs_through_kfp_local(kfp_local, trained_model_dir, base_run, tmp_path):
    # kfp.local (2.15) needs every input artifact bound, optional ones included: the baseline is given too.
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(base_run.results))

    @dsl.pipeline
    def evaluate_locally() -> dsl.Metrics:
        model = dsl.importer(artifact_uri=str(trained_model_dir), artifact_class=dsl.Model, reimport=True)
        data = dsl.importer(artifact_uri=str(DEMO_DATASET_PATH), artifact_class=dsl.Dataset, reimport=True)
        tasks = dsl.importer(artifact_uri=str(CUSTOM_TASKS), artifact_class=dsl.Artifact, reimport=True)
        base = dsl.importer(artifact_uri=str(baseline), artifact_class=dsl.Artifact, reimport=True)
        task = lm_eval(
            model=model.output,
            eval_dataset=data.output,
            custom_tasks=tasks.output,
            baseline_results=base.output,
            task_names=["arith_choice"],
            **{**FAST, "batch_size": "auto"},  # the default: lm-eval detects the largest batch that fits
        )
        return task.outputs["metrics"]

    metrics = evaluate_locally().output
    assert {"arith_choice/acc", "heldout_generation/chrf", "heldout_perplexity/token_loss"} <= set(metrics.metadata)
    assert metrics.metadata["heldout_perplexity/token_loss"] < base_run.metrics["heldout_perplexity/token_loss"]
    report = next(kfp_local.rglob("report.html")).read_text()  # the extension the KFP UI renders by
    assert "<h2>heldout_perplexity</h2>" in report and "<h2>arith_choice</h2>" in report
    assert "<th>Δ vs base</th>" in report
    results = json.loads(next(kfp_local.rglob("results")).read_text())
    assert (
        results["results"]["heldout_perplexity"]["token_loss,none"] == metrics.metadata["heldout_perplexity/token_loss"]
    )


def test_limit_zero_is_refused(tiny_model_dir, tmp_path):
    with pytest.raises(ValueError, match="limit must be -1 .* got 0"):
        _run(tmp_path, tiny_model_dir, limit=0)
    assert not (tmp_path / "results.json").exists() and not (tmp_path / "report.html").exists()


def test_chat_template_on_a_tokenizer_without_one_is_refused(tiny_model_dir, tmp_path):
    base = Path(shutil.copytree(tiny_model_dir, tmp_path / "base"))
    config = json.loads((base / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (base / "tokenizer_config.json").write_text(json.dumps(config))
    (base / "chat_template.jinja").unlink(missing_ok=True)
    with pytest.raises(ValueError, match=f"tokenizer of {base} has no chat template; set apply_chat_template to false"):
        _run(tmp_path / "out", base)
    # The base model of a chat fine-tune without a chat template: the base-model evaluation skips, not fails.
    skipped = _run(tmp_path / "skipped", None, model_source=str(base), skip_unusable_model_source=True)
    assert skipped.results["skipped"] == (
        f"model_source {str(base)!r} has no chat template and apply_chat_template is true "
        "(compare with it set to false)"
    )


def test_a_pod_that_requested_a_gpu_and_sees_none_fails_with_the_guides_string(tiny_model_dir, tmp_path, monkeypatch):
    """The guide's ``No CUDA GPUs are available``, not a slow CPU run; ``device='cpu'`` evaluates on CPU on purpose."""
    from components.evaluation.lm_eval.devices import REQUESTED_GPUS_ENV

    monkeypatch.setenv(REQUESTED_GPUS_ENV, "1")  # what the pipelines set on a GPU evaluation (this host has none)
    with pytest.raises(
        RuntimeError, match=r"^No CUDA GPUs are available: this evaluation pod requested 1 GPU"
    ) as error:
        _run(tmp_path / "gpu", tiny_model_dir)
    assert "--eval-gpus 0" in str(error.value) and "device='cpu'" in str(error.value)
    assert not (tmp_path / "gpu" / "results.json").exists()
    on_cpu = _run(tmp_path / "cpu", tiny_model_dir, device="cpu")
    assert on_cpu.results["results"], on_cpu.results


def test_empty_eval_dataset_is_refused_unless_allowed(tiny_model_dir, tmp_path):
    empty = tmp_path / "eval.jsonl"
    empty.write_text("")
    with pytest.raises(EvalDatasetError, match=f"eval_dataset {empty}: no conversations"):
        _run(tmp_path / "refused", tiny_model_dir, eval_dataset=empty)
    skipped = _run(tmp_path / "skipped", tiny_model_dir, eval_dataset=empty, allow_empty_eval_dataset=True)
    assert skipped.metrics == {} and skipped.results["results"] == {}
    assert "No task was evaluated" in skipped.report


def test_unreachable_benchmark_dataset_says_how_to_reach_it_offline(tiny_model_dir, tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "hub_task.yaml").write_text(
        (CUSTOM_TASKS / "arith_choice.yaml")
        .read_text()
        .replace("task: arith_choice", "task: hub_task")
        .replace("dataset_path: json", "dataset_path: example-org/not-in-the-cache")
    )
    with pytest.raises(BenchmarkDataError, match="example-org/not-in-the-cache.*HF_DATASETS_OFFLINE=1"):
        _run(tmp_path / "out", tiny_model_dir, eval_dataset=None, task_names=["hub_task"], custom_tasks=tasks)


def test_unknown_task_lists_close_matches_from_the_builtin_index(tiny_model_dir, tmp_path):
    """Indexes lm-eval's ~15,000 built-in task files (about 15 s), as a run asking for a built-in task does."""
    with pytest.raises(UnknownTaskError) as error:
        names = ["arc_eazy", "arith_choise"]
        _run(tmp_path, tiny_model_dir, eval_dataset=None, task_names=names, custom_tasks=CUSTOM_TASKS)
    message = str(error.value)
    assert "unknown lm-eval task 'arc_eazy' (close matches: arc_easy" in message
    assert "unknown lm-eval task 'arith_choise' (close matches: arith_choice" in message


def test_delta_metrics_and_the_comparison_agree_with_the_two_runs(chat_run, base_run):
    for name in HELDOUT_METRICS:
        metric = f"heldout_{name}"
        tuned, base = chat_run.metrics[metric], base_run.metrics[metric]
        assert chat_run.metrics[f"{metric}/base"] == base
        assert chat_run.metrics[f"{metric}/delta"] == pytest.approx(tuned - base)
        record = chat_run.results_metadata["comparison"][metric]
        assert (record["base"], record["tuned"]) == (base, tuned)
    chrf = chat_run.results_metadata["comparison"]["heldout_generation/chrf"]
    stderr = math.hypot(
        base_run.metrics["heldout_generation/chrf_stderr"], chat_run.metrics["heldout_generation/chrf_stderr"]
    )
    assert chrf["stderr"] == pytest.approx(stderr)
    assert chrf["beyond_noise"] == (abs(chrf["delta"]) > stderr)
    assert base_run.results["config"]["model_args"]["pretrained"] in chat_run.results_metadata["baseline_model"]


def test_a_task_directory_in_task_names_evaluates_its_tasks(plain_run):
    assert plain_run.results_metadata["tasks"] == ["arith_choice", "heldout_generation", "heldout_perplexity"]
    assert "arith_choice/acc" in plain_run.metrics


def test_turned_off_or_unloadable_base_model_writes_skipped_outputs(tmp_path, trained_model_dir):
    off = _run(tmp_path / "off", None, model_source="/no/such/model", enabled=False)
    assert off.metrics == {} and off.results["skipped"] == "turned off (enabled is false)"
    assert off.results_metadata["skipped"] == off.results["skipped"] and "Not evaluated" in off.report
    oci = _run(tmp_path / "oci", None, model_source="oci://quay.io/org/model:1", skip_unusable_model_source=True)
    assert "oci:// URI" in oci.results["skipped"] and oci.metrics == {}
    missing = _run(
        tmp_path / "missing", None, model_source="/models/only-in-the-training-pod", skip_unusable_model_source=True
    )
    assert "'/models/only-in-the-training-pod' is no directory in this pod" in missing.results["skipped"]
    with pytest.raises(ModelSourceError, match="model_source: 'oci://quay.io/org/model:1' is a oci:// URI"):
        _run(tmp_path / "refused", None, model_source="oci://quay.io/org/model:1")
    # A tuned run given a skipped baseline says so, and logs no comparison metrics.
    tuned = _run(tmp_path / "tuned", trained_model_dir, baseline=Path(tmp_path / "off" / "results.json"), limit=2)
    assert tuned.results_metadata["baseline_skipped"] == "turned off (enabled is false)"
    assert not any(name.endswith("/delta") for name in tuned.metrics)
    assert "Base model not evaluated:</strong> turned off" in tuned.report


def _manifest_artifact(weights: Path, artifact: Path) -> Path:
    """``train_model``'s ``Model`` artifact for a cluster job: the manifest of ``weights`` (on the workspace) only."""
    from components._common.model_location import STORAGE_WORKSPACE, build_manifest, write_manifest

    write_manifest(artifact, build_manifest(weights, STORAGE_WORKSPACE, in_artifact=False))
    return artifact


def test_the_weights_are_read_in_place_on_the_workspace(trained_model_dir, tmp_path):
    """A manifest-only artifact evaluates the weights on the workspace: the same scores as the files themselves."""
    weights = Path(shutil.copytree(trained_model_dir, tmp_path / "kfp-workspace" / "train_model" / "run" / "final"))
    artifact = _manifest_artifact(weights, tmp_path / "root" / "output_model")
    run = _run(tmp_path / "out", artifact, pvc_path=str(tmp_path / "kfp-workspace"), max_samples=4)
    assert run.results_metadata["model"] == str(weights)
    assert run.metrics and run.metrics == _run(tmp_path / "direct", trained_model_dir, max_samples=4).metrics


def test_changed_weights_on_the_workspace_are_refused_before_evaluating(tiny_model_dir, tmp_path):
    from components._common.model_location import ModelLocationError

    weights = Path(shutil.copytree(tiny_model_dir, tmp_path / "kfp-workspace" / "final"))
    artifact = _manifest_artifact(weights, tmp_path / "root" / "output_model")
    (weights / "config.json").write_text((weights / "config.json").read_text().replace(" ", "\t"))
    with pytest.raises(ModelLocationError, match="config.json changed .*refusing to use changed weights"):
        _run(tmp_path / "out", artifact)
    assert not (tmp_path / "out" / "results.json").exists()
