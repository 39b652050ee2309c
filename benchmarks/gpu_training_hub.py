"""The pod command on one NVIDIA GPU with the real Training Hub: SFT, OSFT and LoRA, offline, end to end.

For each algorithm it stages a run directory exactly as ``train_model`` does (the request from the component's
defaults, ``config.train_model_request``, ``run.write_run_config``: the pod entrypoint, its modules,
``run_config.json``, the data), runs the TrainJob's command (``python entrypoint.py --config ...``, from
``job_from_request.build_job_manifest``) for a few hundred optimizer steps on a small Llama built offline, and checks:

* the loss falls (mean of the last 10 steps below 0.8 x the mean of the first 10, from the metrics file Training Hub
  wrote, read by the pod's own reader);
* the saved Hugging Face checkpoint (``hf_format/samples_*``; LoRA: the adapter) loads with transformers (peft for
  the adapter) on the GPU and generates;
* the evaluation step's model loading (``lm_eval`` ``resolve_model`` -> lm-eval's ``hf`` model on ``cuda``) works
  on it;
* throughput: the same keyword arguments passed to ``training_hub.sft`` / ``osft`` directly (a plain script), timed
  the same way; the pod command should reach >= 0.95x of it (same-run ratio; tokens/s = the dataset's tokens x
  epochs / wall seconds of the process, data processing included on both sides).

Needs: one NVIDIA GPU; torch (CUDA), transformers, peft, accelerate; the Training Hub wheels
(``scripts/gpu_wheels.sh`` downloads them into ``.whl/``; ``pip install --no-deps --no-index .whl/*``); LoRA also needs
Training Hub's ``lora`` extra (unsloth, trl; ``scripts/gpu_wheels.sh --lora``), else it is reported as skipped.
No network: the model and tokenizer are built locally, Hugging Face is forced offline.

``--backend transformers`` runs the same checks on the ``transformers`` backend (``training_backend="transformers"``:
``transformers.Trainer`` under torchrun with NCCL, peft for LoRA; the pod command is
``<run dir>/transformers/launch.py``; no Training Hub wheels needed, LoRA included), where the throughput reference
is the Training Hub result of a ``--backend training-hub`` run of the same ``--out`` (the ratio printed when both are
in ``results.json``).

Usage (from the repository root): ``python benchmarks/gpu_training_hub.py --out DIR [--steps 300]
[--algorithms sft,osft,lora] [--backend training-hub|transformers] [--write-figures]``. Prints one line per algorithm
and writes ``DIR/results[-transformers].json`` (``--write-figures``: the README's figures into ``docs/figures.json``);
exit code 1 when a check failed, 2 when there is no GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

#: A real architecture, small enough to train a few hundred steps in minutes: a 4-layer Llama (~20M parameters).
MODEL_DIMENSIONS = {
    "hidden_size": 512,
    "intermediate_size": 1408,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
}
BATCH = 16
LEARNING_RATE = {"sft": 5e-4, "osft": 5e-4, "lora": 2e-3}
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_DISABLED": "true"}


def _env() -> dict[str, str]:
    env = {**os.environ, **OFFLINE, "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": "0"}
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"  # torchrun beside this python
    env.pop("PYTHONPATH", None)  # the staged run directory must be self-sufficient, as in the pod
    return env


def _dataset(path: Path, rows: int) -> int:
    """Writes ``rows`` demo conversations; returns their token count under the tiny tokenizer's chat template."""
    from transformers import AutoTokenizer

    from pipelines.demo.demo_data import demo_conversations

    conversations = list(demo_conversations(rows=rows, seed=7))
    path.write_text("".join(json.dumps(row) + "\n" for row in conversations))
    tokenizer = AutoTokenizer.from_pretrained(path.parent / "model")
    encoded = (tokenizer.apply_chat_template(row["messages"], tokenize=True, return_dict=True) for row in conversations)
    return sum(len(item["input_ids"]) for item in encoded)


#: The ``train_model`` arguments of every benchmark run (the rest: the component's defaults).
BENCH_ARGUMENTS = {
    "training_effective_batch_size": BATCH,
    "training_max_seq_len": 512,
    "training_max_tokens_per_gpu": 8192,
    "training_warmup_steps": 10,
    "training_checkpoint_at_epoch": False,
    "training_resume": False,
    "training_jit_checkpoint": False,
    "training_progress_tracking": False,
    "training_namespace": "bench",
    "training_gpus_per_node": 1,
}


def bench_request(model: Path, algorithm: str, epochs: int, backend: str = "") -> Any:
    """One run's ``TrainModelRequest``: the component's defaults and :data:`BENCH_ARGUMENTS`, built as it builds one."""
    from components.training.finetuning import train_model
    from components.training.finetuning.config import train_model_request
    from tests.harness.requests import wrapper_arguments

    arguments = wrapper_arguments(
        train_model,
        **BENCH_ARGUMENTS,
        training_base_model=str(model),
        training_algorithm=algorithm,
        training_learning_rate=LEARNING_RATE[algorithm],
        training_num_epochs=epochs,
        training_lr_scheduler="linear" if algorithm == "lora" else "cosine",
        training_backend=backend,
    )
    return train_model_request(arguments)


def stage(algorithm: str, work: Path, epochs: int, backend: str = "") -> tuple[Any, list[str]]:
    """Stages a run directory as ``train_model`` does (``run.write_run_config``).

    Returns:
        The staged run config (a ``RunConfig``) and the pod command: the TrainJob's command and arguments, with this
        Python in place of the image's ``python``.
    """
    from components.training.finetuning import job_from_request, launch, run
    from components.training.finetuning.contract import (
        TERMINATION_LOG,
        MlflowSettings,
        ProgressSettings,
        load_run_config,
    )

    request = bench_request(work / "model", algorithm, epochs, backend)
    config = request.training
    run_dir = work / f"{algorithm}{'-' + backend if backend else ''}" / "train-model-benchmark"
    run_dir.mkdir(parents=True)
    progress = ProgressSettings(
        enabled=request.progress.tracking,
        port=request.progress.metrics_port,
        termination_log=TERMINATION_LOG,
    )
    settings = launch.PodSettings(progress, request.job.jit_checkpoint, MlflowSettings("", "", ""))
    path = run.write_run_config(config, run_dir, work / "train.jsonl", None, None, 1, settings)
    manifest = job_from_request.build_job_manifest("trainjob", path, None, "bench", algorithm, request, None)
    trainer = manifest["spec"]["trainer"]
    return load_run_config(path), [sys.executable, *trainer["command"][1:], *trainer["args"]]


def _timed(command: list[str], log: Path) -> tuple[int, float]:
    started = time.perf_counter()
    with log.open("w") as handle:
        code = subprocess.run(command, env=_env(), stdout=handle, stderr=subprocess.STDOUT, timeout=3600).returncode
    return code, time.perf_counter() - started


def direct_script(run_config: Any, work: Path, tag: str) -> Path:
    """The same call without the pod command: a plain script calling ``training_hub.<function>(**kwargs)``."""
    from components.training.finetuning.pod import entrypoint

    direct = dataclasses.replace(run_config, ckpt_output_dir=str(work / f"{tag}-direct"))
    name, kwargs = entrypoint.training_hub_call(direct, {"PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": "0"})
    keywords, environment = entrypoint.image_settings(name, log=lambda line: None)  # what the pod adds for this image
    kwargs.update(keywords)
    script = work / f"{tag}-direct.py"
    script.write_text(
        f"import json, os, training_hub\nos.environ.update({environment!r})\n"
        f"training_hub.{name}(**json.loads({json.dumps(json.dumps(kwargs))}))\n"
    )
    return script


def _direct(run_config: Any, work: Path, tag: str) -> tuple[int, float]:
    """Times :func:`direct_script`."""
    return _timed([sys.executable, str(direct_script(run_config, work, tag))], work / f"{tag}-direct.log")


def _loss_falls(ckpt: Path, epochs: int) -> tuple[bool, list[float]]:
    from components.training.finetuning.pod import metrics

    losses = [r["loss"] for r in metrics.read_metrics(ckpt, epochs)]
    first, last = losses[:10], losses[-10:]
    return len(losses) >= 20 and sum(last) / len(last) < 0.8 * sum(first) / len(first), losses


def _generate(checkpoint: Path, base: Path) -> str:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    if (checkpoint / "adapter_config.json").is_file():
        from peft import AutoPeftModelForCausalLM

        model = AutoPeftModelForCausalLM.from_pretrained(checkpoint, torch_dtype=torch.bfloat16).to("cuda")
    else:
        model = AutoModelForCausalLM.from_pretrained(checkpoint, torch_dtype=torch.bfloat16).to("cuda")
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 12 plus 7?"}],
        add_generation_prompt=True,
        return_tensors="pt",
        return_dict=True,
    )["input_ids"].to("cuda")
    output = model.generate(prompt, max_new_tokens=16, do_sample=False)
    return tokenizer.decode(output[0, prompt.shape[1] :], skip_special_tokens=True)


def evaluation_spec(checkpoint: Path, base: Path) -> Any:
    """The evaluation step's model resolution (``lm_eval`` ``resolve_model``) of the trained checkpoint."""
    from components.evaluation.lm_eval.model_spec import resolve_model

    return resolve_model(str(checkpoint), {"base_model": str(base)}, model_source="", backend="hf")


def _evaluation_loads(checkpoint: Path, base: Path) -> str:
    """:func:`evaluation_spec`, then lm-eval's ``hf`` model on the GPU scoring one continuation."""
    from lm_eval.api.instance import Instance
    from lm_eval.api.registry import get_model

    spec = evaluation_spec(checkpoint, base)
    lm = get_model(spec.lm_eval_model).create_from_arg_obj({**spec.model_args, "device": "cuda", "batch_size": 1})
    request = Instance("loglikelihood", {}, ("12 + 7 =", " 19"), 0)
    [(logprob, _)] = lm.loglikelihood([request])
    return f"{spec.lm_eval_model} on {lm.device}, log p(' 19') = {logprob:.2f}"


def run(algorithm: str, work: Path, steps: int, tokens: int, rows: int, backend: str = "") -> dict:
    """One algorithm: the pod command, the checks, and (Training Hub SFT/OSFT) the direct call for the ratio."""
    from components.training.finetuning.publish import find_final_checkpoint

    epochs = max(1, round(steps * BATCH / rows))
    run_config, command = stage(algorithm, work, epochs, backend)
    tag = f"{algorithm}-{backend}" if backend else algorithm
    code, seconds = _timed(command, work / f"{tag}-pod.log")
    result: dict = {"algorithm": algorithm, "exit_code": code, "pod_seconds": round(seconds, 1), "epochs": epochs}
    result["backend"] = backend or "training-hub"
    if code != 0:
        tail = (work / f"{tag}-pod.log").read_text()[-1500:]
        result["error"] = tail
        return result
    ckpt = Path(run_config.ckpt_output_dir)
    result["loss_falls"], losses = _loss_falls(ckpt, epochs)
    result["steps"], result["loss_first"], result["loss_last"] = len(losses), losses[0], losses[-1]
    checkpoint = find_final_checkpoint(ckpt)
    result["checkpoint"] = str(checkpoint)
    result["generated"] = _generate(checkpoint, work / "model")
    result["evaluation"] = _evaluation_loads(checkpoint, work / "model")
    result["pod_tokens_per_second"] = round(tokens * epochs / seconds)
    if algorithm != "lora" and not backend:
        direct_code, direct_seconds = _direct(run_config, work, algorithm)
        result["direct_exit_code"] = direct_code
        result["direct_tokens_per_second"] = round(tokens * epochs / direct_seconds)
        result["ratio"] = round(direct_seconds / seconds, 3)
    return result


def main() -> int:
    """Builds the model and data, runs each algorithm, prints one line each and writes ``results.json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="work directory (created); results.json goes here")
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps per algorithm (about)")
    parser.add_argument("--rows", type=int, default=2400, help="demo conversations in the training file")
    parser.add_argument("--algorithms", default="sft,osft,lora")
    parser.add_argument("--backend", default="training-hub", choices=("training-hub", "transformers"))
    parser.add_argument("--write-figures", action="store_true", help="record the README's figures in docs/figures.json")
    args = parser.parse_args()
    backend = "" if args.backend == "training-hub" else args.backend
    os.environ.update(OFFLINE)
    import torch

    if not torch.cuda.is_available():
        print("gpu_training_hub: no NVIDIA GPU visible to torch; this benchmark needs one", file=sys.stderr)
        return 2
    from pipelines.demo.tiny_model import build_tiny_model

    work = args.out.resolve()
    work.mkdir(parents=True, exist_ok=True)
    build_tiny_model(work / "model", **MODEL_DIMENSIONS)
    tokens = _dataset(work / "train.jsonl", args.rows)
    print(f"GPU: {torch.cuda.get_device_name(0)}; model {MODEL_DIMENSIONS}; {args.rows} rows, {tokens} tokens")
    results, failed = [], False
    for algorithm in args.algorithms.split(","):
        if algorithm == "lora" and not backend and not _has_lora_extra():
            results.append({"algorithm": "lora", "skipped": "training-hub[lora] (unsloth, trl) is not installed"})
            print("lora: skipped (training-hub[lora]: unsloth and trl are not installed)")
            continue
        result = run(algorithm, work, args.steps, tokens, args.rows, backend)
        results.append(result)
        ok = result["exit_code"] == 0 and result.get("loss_falls") and result.get("direct_exit_code", 0) == 0
        failed |= not ok
        print(_line(result, ok))
    (work / f"results{'-' + backend if backend else ''}.json").write_text(json.dumps(results, indent=2))
    if args.write_figures:
        record_figures(results, backend)
    if backend and (work / "results.json").is_file():  # same machine, same data: transformers vs Training Hub
        hub_results = json.loads((work / "results.json").read_text())
        hub = {r["algorithm"]: r for r in hub_results if r.get("exit_code") == 0}  # a failed run has no throughput
        for result in results:
            if result.get("exit_code") == 0 and result["algorithm"] in hub:
                ratio = hub[result["algorithm"]]["pod_seconds"] / result["pod_seconds"]
                print(f"{result['algorithm']}: transformers/training-hub throughput {ratio:.3f}x")
    return 1 if failed else 0


def record_figures(results: list[dict], backend: str) -> None:
    """Records each passing run's first and last loss and pod/direct ratio (``gpu.<stack>.<algorithm>.*``)."""
    from importlib.metadata import version

    from scripts.figures import figure, record

    stack = backend or "th_" + version("training-hub").replace(".", "_")
    found = {}
    for result in results:
        if result.get("exit_code") != 0:
            continue
        prefix = f"gpu.{stack}.{result['algorithm']}"
        for side in ("first", "last"):
            loss = result[f"loss_{side}"]
            found[f"{prefix}.loss.{side}"] = figure(round(loss, 3), "nats per token", f"{loss:.2f}")
        if "ratio" in result:
            found[f"{prefix}.pod_direct_ratio"] = figure(result["ratio"], "x", f"{result['ratio']:.3f}")
    record(found, "benchmarks/gpu_training_hub.py")


def _has_lora_extra() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(name) for name in ("unsloth", "trl"))


def _line(result: dict, ok: bool) -> str:
    if result["exit_code"] != 0:
        return f"{result['algorithm']}: FAILED (exit {result['exit_code']}); see the log: {result['error'][-300:]}"
    line = (
        f"{result['algorithm']}: {'OK' if ok else 'FAILED'} {result['steps']} steps, loss {result['loss_first']:.3f}"
        f" -> {result['loss_last']:.3f}; pod {result['pod_tokens_per_second']} tok/s"
    )
    if "ratio" in result:
        line += f" vs direct {result['direct_tokens_per_second']} tok/s (pod/direct {result['ratio']:.3f}x, goal 0.95)"
    return line + f"; generates {result['generated']!r}; eval: {result['evaluation']}"


if __name__ == "__main__":
    sys.exit(main())
