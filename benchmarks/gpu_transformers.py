"""The ``transformers`` backend's pod command on one NVIDIA GPU: NCCL, step time, memory, pause and resume.

(Loss, generation, the evaluation step's loading and the throughput against Training Hub on the same data are
``python benchmarks/gpu_training_hub.py --backend transformers``; this script adds the pause/resume and memory checks.)

What the CPU tests cannot show: the staged pod command (``<run dir>/transformers/launch.py``, exactly as a TrainJob of
``training_backend="transformers"`` runs it) under ``torchrun`` with the NCCL process group on a GPU. For each
algorithm it trains a randomly initialised Llama (``--hidden``/``--layers``, built offline from the tiny model's
tokenizer) on the demo dataset and prints ms/step, tokens/s, peak GPU memory and the loss; then it pauses one run with
SIGTERM mid-training (the JIT checkpoint) and resumes it, checking that the resumed run continues at the next step.
Same-run ratios: LoRA/SFT and OSFT/SFT step time.

Usage (no network; torch, transformers, peft installed): ``python benchmarks/gpu_transformers.py [--steps 40]
[--hidden 1024] [--layers 8] [--algorithms sft,lora,osft]``. ``--cpu`` runs the same on CPU with gloo (a smoke test
where there is no GPU; the figures then mean nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

for _name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ[_name] = "1"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def build_model(target: Path, hidden: int, layers: int) -> Path:
    """A randomly initialised Llama of the given size with the tiny model's tokenizer and chat template."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from pipelines.demo.tiny_model import build_tiny_model

    tiny = build_tiny_model(target.parent / "tiny")
    config = AutoConfig.from_pretrained(tiny)
    heads = max(hidden // 64, 1)
    config.update(
        {
            "hidden_size": hidden,
            "intermediate_size": hidden * 4,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "num_key_value_heads": heads,
            "head_dim": hidden // heads,
        }
    )
    AutoModelForCausalLM.from_config(config).save_pretrained(target)
    AutoTokenizer.from_pretrained(tiny).save_pretrained(target)
    return target


#: The ``train_model`` arguments of every benchmark run (the rest: the component's defaults).
BENCH_ARGUMENTS = {
    "training_backend": "transformers",
    "training_effective_batch_size": 16,
    "training_max_seq_len": 512,
    "training_max_tokens_per_gpu": 8192,
    "training_lr_scheduler": "constant",
    "training_namespace": "bench",
    "training_gpus_per_node": 1,
}


def bench_request(model: Path, algorithm: str, steps: int) -> Any:
    """One run's ``TrainModelRequest``: the component's defaults and :data:`BENCH_ARGUMENTS`, built as it builds one."""
    from components.training.finetuning import train_model
    from components.training.finetuning.config import train_model_request
    from tests.harness.requests import wrapper_arguments

    arguments = wrapper_arguments(
        train_model,
        **BENCH_ARGUMENTS,
        training_base_model=str(model),
        training_algorithm=algorithm,
        training_learning_rate=3e-4 if algorithm == "sft" else 3e-3,
        training_max_steps=steps,
    )
    return train_model_request(arguments)


def stage(run_dir: Path, model: Path, algorithm: str, steps: int) -> list[str]:
    """Stages the run directory as ``train_model`` does (``run.write_run_config``); returns the pod command."""
    from components.training.finetuning import job_from_request, launch, run
    from components.training.finetuning.contract import MlflowSettings, ProgressSettings
    from pipelines.demo.demo_data import DEMO_DATASET_PATH

    request = bench_request(model, algorithm, steps)
    config = request.training
    config.validate()
    run_dir.mkdir(parents=True)
    progress = ProgressSettings(enabled=False, port=28080, termination_log="/dev/termination-log")
    settings = launch.PodSettings(progress=progress, jit_checkpoint=True, mlflow=MlflowSettings("", "", ""))
    config_path = run.write_run_config(config, run_dir, DEMO_DATASET_PATH, None, None, 1, settings)
    manifest = job_from_request.build_job_manifest("trainjob", config_path, None, "bench", algorithm, request, None)
    trainer = manifest["spec"]["trainer"]
    return [sys.executable, *trainer["command"][1:], *trainer["args"]]


def pod_env() -> dict[str, str]:
    """What Kubeflow Trainer's torch runtime injects into a 1-node x 1-GPU TrainJob's pod."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(
        PET_NNODES="1",
        PET_NPROC_PER_NODE="1",
        PET_NODE_RANK="0",
        PET_MASTER_ADDR="127.0.0.1",
        PET_MASTER_PORT=str(_free_port()),
        PYTHONUNBUFFERED="1",
    )
    return env


def run_pod(command: list[str], log: Path, stop_at_step: int = 0, metrics: Path | None = None) -> int:
    """Runs the pod command; with ``stop_at_step`` sends SIGTERM once the metrics file reaches that step."""
    with log.open("w") as handle:
        process = subprocess.Popen(command, env=pod_env(), stdout=handle, stderr=subprocess.STDOUT)
        while stop_at_step and process.poll() is None:
            lines = metrics.read_text().splitlines() if metrics and metrics.exists() else []
            if len(lines) >= stop_at_step:
                process.send_signal(signal.SIGTERM)
                break
            time.sleep(0.05)
        return process.wait(timeout=1800)


def figures(ckpt_dir: Path, steps: int) -> dict[str, float]:
    """ms/step (after the first 3 steps), last tokens/s, first/last loss and peak GPU memory of a finished run."""
    from components.training.finetuning.pod import metrics as metrics_module
    from components.training.finetuning.transformers_backend import read_result

    records = metrics_module.read_metrics(ckpt_dir / "metrics.jsonl")
    assert [r["step"] for r in records] == list(range(1, steps + 1)), [r["step"] for r in records]
    warm = records[3:] or records
    per_step = (warm[-1]["time"] - warm[0]["time"]) / max(len(warm) - 1, 1)
    result = read_result(ckpt_dir)
    return {
        "ms_per_step": per_step * 1000,
        "tokens_per_second": records[-1]["tokens_per_second"],
        "loss_first": records[0]["loss"],
        "loss_last": records[-1]["loss"],
        "peak_gib": result.get("peak_gpu_memory_bytes", 0) / 2**30,
    }


def main() -> int:
    """Trains each algorithm through the pod command, then pauses and resumes one run; prints the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--algorithms", default="sft,lora,osft")
    parser.add_argument("--cpu", action="store_true", help="smoke test on CPU (gloo) where there is no GPU")
    args = parser.parse_args()
    import torch

    if not args.cpu and not torch.cuda.is_available():
        print("no CUDA GPU here: run on a GPU machine, or pass --cpu for a smoke test", file=sys.stderr)
        return 2
    env_note = "CPU (gloo), smoke test" if args.cpu else f"{torch.cuda.get_device_name(0)} (NCCL)"
    if args.cpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    print(f"transformers backend pod command on {env_note}; model hidden={args.hidden} layers={args.layers}")
    rows, failures = {}, []
    with tempfile.TemporaryDirectory(prefix="gpu-transformers-") as workdir:
        root = Path(workdir)
        model = build_model(root / "model", args.hidden, args.layers)
        for algorithm in args.algorithms.split(","):
            run_dir = root / algorithm
            command = stage(run_dir, model, algorithm, args.steps)
            code = run_pod(command, root / f"{algorithm}.log")
            if code != 0:
                failures.append(f"{algorithm}: exit {code}\n{(root / f'{algorithm}.log').read_text()[-3000:]}")
                continue
            rows[algorithm] = figures(run_dir / "checkpoints", args.steps)
        # Pause (SIGTERM at a third of the run) and resume: the JIT checkpoint on the GPU.
        algorithm = args.algorithms.split(",")[0]
        run_dir = root / "paused"
        command = stage(run_dir, model, algorithm, args.steps)
        ckpt_dir = run_dir / "checkpoints"
        paused = run_pod(command, root / "paused-1.log", args.steps // 3, ckpt_dir / "metrics.jsonl")
        markers = sorted((ckpt_dir / "checkpoints").glob("step_*/done.json"))
        resumed = run_pod(command, root / "paused-2.log")
        resume_log = (root / "paused-2.log").read_text()
        if not markers or resumed != 0:
            failures.append(f"pause/resume: exit {paused} then {resumed}, checkpoints {markers}\n{resume_log[-3000:]}")
        else:
            step = json.loads(markers[-1].read_text())["step"]
            ok = f"step {step + 1}/{args.steps}" in resume_log and (ckpt_dir / "final" / "config.json").is_file()
            print(f"pause/resume ({algorithm}): SIGTERM saved step {step}; resumed at step {step + 1}: {ok}")
            if not ok:
                failures.append(f"pause/resume did not continue at step {step + 1}\n{resume_log[-3000:]}")
    print("| algorithm | ms/step | tokens/s | peak GPU GiB | loss first -> last |")
    print("|---|---|---|---|---|")
    for algorithm, row in rows.items():
        print(
            f"| {algorithm} | {row['ms_per_step']:.1f} | {row['tokens_per_second']:.0f} | {row['peak_gib']:.2f} | "
            f"{row['loss_first']:.3f} -> {row['loss_last']:.3f} |"
        )
    if "sft" in rows:
        for algorithm in ("lora", "osft"):
            if algorithm in rows:
                print(f"{algorithm}/sft step time: {rows[algorithm]['ms_per_step'] / rows['sft']['ms_per_step']:.2f}x")
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
