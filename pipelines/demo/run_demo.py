"""``kfp-finetune demo``: a whole fine-tuning pipeline, locally, on the tiny model and the shipped demo data.

The expert pipeline of the chosen algorithm runs under ``kfp.local`` (subprocess runner) with the local launcher. The
terminal shows a short story (:mod:`.story`); the tasks' whole output goes to ``<output-dir>/demo.log``. Scratch files
live under the output directory and are removed when the run ends.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

from pipelines.demo.demo_data import DEMO_DATASET_PATH, GRPO_DATASET_PATH
from pipelines.demo.demo_summary import STEP_TASKS, output_types, summarize_run, summary_lines
from pipelines.demo.tiny_model import GENERAL_TASK, GENERAL_TASK_DIR, teach_general_sentences

#: The demo's training settings, shared by the three algorithms: 8 epochs of 45 steps on 2 CPU cores teach the tiny
#: model the answer format ``a op b = c`` (it is too small to learn the arithmetic itself).
DEMO_ARGUMENTS = {
    "training_num_epochs": 8,
    "training_effective_batch_size": 8,
    "training_max_tokens_per_gpu": 4096,
    "training_learning_rate": 3e-3,
    "training_max_seq_len": 256,
    "training_max_steps": 0,
    "training_warmup_steps": 10,
    "training_unfreeze_rank_ratio": 0.5,
    "training_num_nodes": 1,
    # A ~100k-parameter model's activations are tiny: recomputing them would only slow the demo down.
    "training_gradient_checkpointing": False,
}
#: LoRA: rank 8, alpha 64, no dropout learned best at SFT's epochs and rate (larger rank, alpha 32, dropout did worse).
DEMO_LORA_ARGUMENTS = {"training_lora_r": 8, "training_lora_alpha": 64, "training_lora_dropout": 0.0}
#: GRPO: 20 iterations of 8 prompts x 4 completions of at most 8 tokens; what rises is the reward's format credit. At
#: 2e-3 the gate passes (p~0.01, seed 42); at 1e-2 the reward saturates too fast to call. LoRA-GRPO: 3e-3.
DEMO_GRPO_ARGUMENTS = {
    "training_grpo_iterations": 20,
    "training_grpo_group_size": 4,
    "training_grpo_temperature": 1.0,
    "training_grpo_max_new_tokens": 8,
    "training_effective_batch_size": 8,
    "training_learning_rate": 2e-3,
    "training_max_seq_len": 256,
    "training_lora_r": 8,
    "training_lora_alpha": 64,
}
DEMO_LORA_GRPO_LEARNING_RATE = 3e-3
#: The reinforcement-learning algorithms: a prompt dataset, no lm-eval step, the reward gate decides.
GRPO_DEMOS = ("grpo", "lora_grpo")
#: Every held-out conversation is evaluated; the benchmark is the ``general_sentences`` task the base model was taught.
DEMO_EVAL_ARGUMENTS = {"max_samples": -1, "max_new_tokens": 16, "batch_size": "8"}
#: The tiny base model's initial weight scale: at 0.02 the frozen tied embedding caps every logit near +-1.3 for LoRA.
DEMO_BASE_MODEL = {"initializer_range": 0.1}
#: Variables set while the demo runs (restored afterwards): offline hubs, one torch thread, a CPU evaluation.
DEMO_ENVIRONMENT = {
    "TOKENIZERS_PARALLELISM": "false",
    # A ~100k-parameter model trains fastest on one thread; more threads only contend (4-40x slower on 2 cores).
    "OMP_NUM_THREADS": "1",
    # Evaluate on CPU: with a GPU request compiled in, kfp.local 2.17+ hands the step KFP_FINETUNE_REQUESTED_GPUS.
    "KFP_FINETUNE_EVAL_GPUS": "0",
}


def build_demo_base_model(path: Path) -> float:
    """Builds the demo's tiny base model in ``path`` and teaches it the general sentences; returns the last loss."""
    from pipelines.demo.tiny_model import build_tiny_model

    return teach_general_sentences(build_tiny_model(path, **DEMO_BASE_MODEL))


class DemoFailed(RuntimeError):
    """A demo step failed; the message is ``<task>: <the task's one-line error>``."""


#: What offline mode sets for the demo's steps.
OFFLINE_ENVIRONMENT = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
#: Seconds the Hub has to answer before the demo goes offline.
PROBE_TIMEOUT_S = 5.0


def hub_endpoint(environ: Mapping[str, str]) -> str:
    """``HF_ENDPOINT``, else huggingface.co."""
    return (environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def hub_answers(endpoint: str, repo_id: str) -> bool:
    """Whether the Hub answers a dataset's info request at all (401 and 404 are answers too)."""
    request = urllib.request.Request(f"{endpoint}/api/datasets/{repo_id}", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S):  # noqa: S310 - the user's Hub endpoint
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):  # refused, unresolvable, timed out, a malformed endpoint
        return False


def offline_reason(dataset_uri: str, offline: bool, environ: Mapping[str, str] | None = None) -> str:
    """Why the demo runs offline; ``""`` when it runs online (a Hub dataset, the Hub answers, offline not asked)."""
    from components.data_processing.dataset_download.locations import DatasetSourceError, parse_hf_uri, source_kind

    environ = os.environ if environ is None else environ
    if offline:
        return "asked for (--offline)"
    if str(environ.get("HF_HUB_OFFLINE", "")).lower() in ("1", "true", "yes", "on"):
        return "asked for (HF_HUB_OFFLINE is set)"
    try:
        if source_kind(dataset_uri) != "hf":
            return "nothing to download (the base model is built here, the dataset is not on the Hub)"
        repo_id = parse_hf_uri(dataset_uri).repo_id
    except DatasetSourceError:
        return "nothing to download (the dataset step will say what is wrong with the dataset URI)"
    endpoint = hub_endpoint(environ)
    if not hub_answers(endpoint, repo_id):
        return f"the Hub at {endpoint} does not answer (no network?): the dataset must be in the Hugging Face cache"
    return ""


#: What ``kfp.local`` rewrites in a step's arguments: ``SubprocessRunner`` replaces ``python3`` in every element of a
#: step's command with this interpreter's path (kubeflow/pipelines#14459, open; ``tests/test_wheel.py`` fails once
#: the pinned kfp is fixed). An installed wheel's demo data lies under ``lib/python3.11/``.
KFP_LOCAL_REWRITTEN = "python3"


def steps_data_dir(output_dir: Path, shipped: Path = DEMO_DATASET_PATH.parent) -> Path:
    """``shipped``, or its copy in ``output_dir/data`` when ``kfp.local`` would mangle its path (an installed wheel)."""
    if KFP_LOCAL_REWRITTEN not in str(shipped):
        return shipped
    copy = Path(output_dir) / "data"
    shutil.copytree(shipped, copy, dirs_exist_ok=True)
    return copy


def check_step_arguments(arguments: Mapping[str, Any]) -> None:
    """Raises ``ValueError`` in one line naming the argument when ``kfp.local`` would mangle its value."""
    for name, value in arguments.items():
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, str) and KFP_LOCAL_REWRITTEN in item:
                raise ValueError(
                    f"{name}={item!r}: kfp.local rewrites '{KFP_LOCAL_REWRITTEN}' in a step's arguments into this "
                    "interpreter's path (kubeflow/pipelines#14459); use a path without it (--output-dir, "
                    "--dataset-uri)"
                )


def demo_arguments(
    algorithm: str,
    base_model: Path,
    dataset_uri: str,
    registry_address: str,
    modelcar_uri: str = "",
    modelcar_base_image: str = "",
    general_task_dir: Path = GENERAL_TASK_DIR,
) -> dict[str, Any]:
    """The pipeline arguments of the demo run, by dashboard name (the expert pipeline's parameter feeding each).

    With ``modelcar_uri`` the registry step publishes a modelcar there (plain HTTP to a loopback registry), on
    ``modelcar_base_image``. ``general_task_dir``: the ``general_sentences`` task (a copy, see :func:`steps_data_dir`).
    """
    from pipelines.compile import pipeline_function
    from pipelines.training.finetuning.interface import parameter_feeding

    train = {**DEMO_ARGUMENTS, **(DEMO_LORA_ARGUMENTS if algorithm == "lora" else {})}
    if algorithm in GRPO_DEMOS:
        train = dict(DEMO_GRPO_ARGUMENTS)
        if algorithm == "lora_grpo":
            train["training_learning_rate"] = DEMO_LORA_GRPO_LEARNING_RATE
    by_step = {
        "dataset": {"dataset_uri": dataset_uri, "train_split_ratio": 0.9, "tokenizer_source": str(base_model)},
        "train": {**train, "training_base_model": str(base_model), "training_launcher": "local"},
        "eval": {**DEMO_EVAL_ARGUMENTS, "task_names": [str(general_task_dir)]},
        "registry": {"registry_address": registry_address, "model_name": "kfp-finetune-demo"},
    }
    if modelcar_uri:
        host = modelcar_uri.removeprefix("oci://").split("/", 1)[0].rsplit(":", 1)[0]
        by_step["registry"].update(
            modelcar_uri=modelcar_uri,
            modelcar_base_image=modelcar_base_image,
            modelcar_insecure=host in ("localhost", "127.0.0.1"),
        )
    pipeline = pipeline_function(algorithm.replace("_", "-"))
    arguments = {}
    for step, values in by_step.items():
        for argument, value in values.items():
            name = parameter_feeding(pipeline, step, argument)
            if name is not None:
                arguments[name] = value
    return arguments


@contextlib.contextmanager
def demo_environment(scratch: Path, offline: bool = True) -> Iterator[None]:
    """Sets :data:`DEMO_ENVIRONMENT` (``offline``: also :data:`OFFLINE_ENVIRONMENT`) and ``TMPDIR=scratch`` meanwhile.

    ``kfp.local`` tasks unpack their code under ``TMPDIR``: nothing stays in the system's; ``scratch`` is removed after.
    """
    from unittest import mock

    scratch.mkdir(parents=True, exist_ok=True)
    changes = {**DEMO_ENVIRONMENT, **(OFFLINE_ENVIRONMENT if offline else {}), "TMPDIR": str(scratch)}
    try:
        with mock.patch.dict(os.environ, changes), mock.patch.object(tempfile, "tempdir", None):
            yield
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def run_demo(
    output_dir: Path,
    algorithm: str = "sft",
    dataset_uri: str = "",
    registry_address: str = "",
    verbose: bool = False,
    out: TextIO | None = None,
    modelcar_uri: str = "",
    modelcar_base_image: str = "",
    offline: bool = False,
) -> None:
    """Runs the demo pipeline and tells its story on ``out``; every step's whole output goes to ``demo.log``.

    Args:
        output_dir: Where the tiny base model, the run's outputs and ``demo.log`` go (created).
        algorithm: ``sft``, ``osft``, ``lora``, ``grpo`` or ``lora_grpo``.
        dataset_uri: Training data; default: the shipped demo dataset.
        registry_address: Model Registry host; empty = registration skipped.
        modelcar_uri: ``oci://host:port/repository:tag`` to publish the model to (a local registry); empty = skipped.
        modelcar_base_image: The image the modelcar is layered on (needed with ``modelcar_uri``: the demo is offline).
        verbose: Show every line the tasks print (they always go to ``demo.log``).
        out: Where the story goes (default: standard output).
        offline: Never reach the Hub (else a Hub ``dataset_uri`` is downloaded when the Hub answers).

    Raises:
        DemoFailed: A step failed; the message is the step and its one-line error (the log has everything).
    """
    from pipelines.demo.story import DemoConsole

    output_dir = Path(output_dir).resolve()
    output_dir.mkdir(parents=True, exist_ok=True)
    console = DemoConsole(output_dir / "demo.log", out=out, verbose=verbose)
    data_dir = steps_data_dir(output_dir)
    shipped = GRPO_DATASET_PATH if algorithm in GRPO_DEMOS else DEMO_DATASET_PATH
    dataset_uri = dataset_uri or str(data_dir / shipped.name)
    if modelcar_uri and not modelcar_base_image:
        raise DemoFailed(
            f"--modelcar-uri {modelcar_uri}: give --modelcar-base-image too (an image in a registry this machine "
            "reaches; the demo downloads nothing)"
        )
    try:
        console.say(f"kfp-finetune demo: {algorithm.upper()} fine-tuning of a tiny model, every step run locally")
        console.say(f"  data: {dataset_uri}")
        console.say(f"  full output of every step: {console.log_path}")
        reason = offline_reason(dataset_uri, offline)
        online = f"  online: the dataset comes from {hub_endpoint(os.environ)}"
        console.say(f"  offline: {reason}" if reason else online)
        console.say(
            f"  modelcar: publishing to {modelcar_uri} (on {modelcar_base_image})"
            if modelcar_uri
            else "  modelcar: skipped (--modelcar-uri oci://localhost:5000/demo/tiny:1 publishes to a local registry)"
        )
        arguments = (registry_address, modelcar_uri, modelcar_base_image)
        with demo_environment(output_dir / "tmp", offline=bool(reason)):
            run_dir, types = _run_pipeline(console, output_dir, algorithm, dataset_uri, arguments, data_dir)
        for line in summary_lines(summarize_run(run_dir, types), run_dir):
            console.say(line)
    finally:
        console.close()


def _run_pipeline(
    console: Any,
    output_dir: Path,
    algorithm: str,
    dataset_uri: str,
    registry_arguments: tuple[str, str, str],
    data_dir: Path,
) -> tuple[Path, dict[str, dict[str, str]]]:
    """Builds the base model and runs the pipeline under ``console``; returns the run folder and output types."""
    from kfp import local

    from pipelines.compile import pipeline_function
    from pipelines.local_pipeline import local_pipeline

    pipeline = pipeline_function(algorithm.replace("_", "-"))
    types = output_types(pipeline.pipeline_spec)
    pipeline_root = output_dir / "outputs"
    started_at = time.time()
    with console.capture(task_count=len(types)):
        started = time.perf_counter()
        base_model = output_dir / "base-model"
        loss = build_demo_base_model(base_model)
        console.say(
            f"  tiny base model built and taught the {GENERAL_TASK} task (its 'general ability', loss {loss:.2f}) "
            f"in {time.perf_counter() - started:.1f}s: {base_model}"
        )
        local.init(
            runner=local.SubprocessRunner(use_venv=False),
            pipeline_root=str(pipeline_root),
            workspace_root=str(output_dir / "tmp" / "workspace"),
        )
        general_task_dir = data_dir / GENERAL_TASK_DIR.name
        arguments = demo_arguments(algorithm, base_model, dataset_uri, *registry_arguments, general_task_dir)
        try:
            check_step_arguments({**arguments, "--output-dir": str(pipeline_root)})
        except ValueError as error:
            raise DemoFailed(str(error)) from None
        try:
            local_pipeline(pipeline)(**arguments)
        except Exception as error:
            if console.failure is None:
                raise
            task, line = console.failure
            raise DemoFailed(f"{task}: {line}") from error
    runs = [p for p in pipeline_root.iterdir() if p.is_dir() and p.stat().st_mtime >= started_at - 1]
    run_dir = max(runs, key=lambda p: p.stat().st_mtime)
    evaluated = algorithm not in GRPO_DEMOS  # GRPO: the reward gate decides, no lm-eval step
    missing = [task for step, task in STEP_TASKS.items() if task not in types and (evaluated or "eval" not in step)]
    if missing:
        raise DemoFailed(f"the pipeline has no task {missing}: update STEP_TASKS in pipelines/demo/demo_summary.py")
    return run_dir, types
