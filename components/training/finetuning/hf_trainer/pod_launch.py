"""The ``transformers`` backend's pod command and its ``torchrun`` workers (staged as ``launch.py`` and ``worker.py``).

``launch.py --config`` resolves the base model, then ``exec`` s torchrun (so the pod's SIGTERM reaches the workers);
each worker (``--model-path`` given) is a rank of :func:`.training.train`; rank 0 also writes :data:`RESULT_FILE`,
logs to MLflow and serves progress.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from components._common.files import write_text_atomically
from components.training.finetuning import tracking
from components.training.finetuning.contract import RunConfig, load_run_config
from components.training.finetuning.hf_trainer.data import read_jsonl_rows
from components.training.finetuning.pod import entrypoint, inputs, progress_server

WORKER_SCRIPT = "worker.py"  # staged beside launch.py
#: Written by rank 0 into ``ckpt_output_dir`` when training ends.
RESULT_FILE = "result.json"


def missing_trainer_packages(algorithm: str) -> list[str]:
    """The packages (as ``pip`` names them) the trainer core needs for ``algorithm`` that are absent."""
    needed = ["torch", "transformers", "accelerate", "trl", "datasets"]
    needed += {"lora": ["peft"], "lora_grpo": ["peft"], "osft": ["mini_trainer"]}.get(algorithm, [])
    pip_names = {"mini_trainer": "rhai-innovation-mini-trainer"}
    return [pip_names.get(module, module) for module in needed if importlib.util.find_spec(module) is None]


def torchrun_argv(
    nproc_per_node: int, env: Mapping[str, str], worker: Path, config_path: Path, model_path: str
) -> list[str]:
    """This node's ``torchrun`` argv: a static rendezvous at the master address, no restarts (the controller's job)."""
    kwargs = entrypoint.torchrun_kwargs(env, nproc_per_node)
    argv = [sys.executable, "-m", "torch.distributed.run", "--max-restarts=0"]
    argv.append(f"--nnodes={kwargs.get('nnodes', 1)}")
    argv.append(f"--nproc-per-node={kwargs.get('nproc_per_node', nproc_per_node or 1)}")
    argv.append(f"--node-rank={kwargs.get('node_rank', 0)}")
    if kwargs.get("rdzv_endpoint"):
        address, _, port = str(kwargs["rdzv_endpoint"]).rpartition(":")
        argv += [f"--master-addr={address}", f"--master-port={port}"]
    return [*argv, str(worker), "--config", str(config_path), "--model-path", model_path]


def launch(config_path: Path) -> int:
    """Resolves the model, then replaces this process by ``torchrun`` running the workers."""
    run_config = load_run_config(config_path)
    missing = missing_trainer_packages(run_config.hyperparameters.algorithm)
    if missing:  # one line before torchrun starts
        print(
            f"ERROR: training_backend='transformers' needs {', '.join(missing)} in the training image "
            f"({sys.executable}): use a runtime whose image has them (the PyTorch training images of RHOAI's "
            "torch-distributed runtimes do), or set training_image",
            file=sys.stderr,
            flush=True,
        )
        return 1
    env = dict(os.environ)
    model_path = run_config.model_path or inputs.resolve_base_model(
        run_config.base_model, Path(run_config.model_cache_dir), run_config.pvc_mounts, env
    )
    worker = Path(__file__).with_name(WORKER_SCRIPT)
    command = torchrun_argv(run_config.nproc_per_node, env, worker, config_path, model_path)
    print("transformers backend: " + " ".join(command[1:]), flush=True)
    os.execv(command[0], command)
    return 0  # not reached


def start_tracking(run_config: RunConfig, log: Callable[[str], None]) -> tracking.MlflowLogger:
    """The pods' MLflow run, keyed by its name (a resumed job continues it); a no-op without URI or ``mlflow``."""
    settings = run_config.mlflow
    uri = settings.tracking_uri
    if uri and importlib.util.find_spec("mlflow") is None:
        log("note: MLflow is configured but the training image has no mlflow package; the KFP step still logs")
        uri = ""
    name = settings.run_name
    try:
        return tracking.MlflowLogger(
            uri, experiment_name=settings.experiment_name, run_name=name, run_key=name, log=log
        )
    except tracking.TrackingError as error:
        log(f"WARNING: {error}; training goes on without the pods' MLflow run")
        return tracking.MlflowLogger("", environ={}, log=log)


def write_result(ckpt_dir: Path, result: Any, device: Any = None) -> Path:
    """Writes :data:`RESULT_FILE` (with this rank's peak GPU memory on CUDA) and returns it."""
    facts: dict[str, Any] = {
        "eval_loss": result.eval_loss,
        "base_eval_loss": result.base_eval_loss,
        "resumed_from": str(result.resumed_from or ""),
        "adapter_path": str(result.adapter_dir or ""),
        "train_seconds": result.train_seconds,
        "final_model_dir": str(result.final_model_dir),
    }
    if device is not None and device.type == "cuda":
        import torch

        facts["peak_gpu_memory_bytes"] = torch.cuda.max_memory_allocated(device)
    path = ckpt_dir / RESULT_FILE
    write_text_atomically(path, json.dumps(facts, indent=1, sort_keys=True))
    return path


def run(run_config: RunConfig, model_path: str, log: Callable[[str], None] = print) -> int:
    """Trains as this rank; returns the exit status (a SIGTERM leaves through ``SystemExit(143)``)."""
    from components.training.finetuning.hf_trainer import training

    config = run_config.hyperparameters
    ckpt_dir = Path(run_config.ckpt_output_dir)
    eval_path = run_config.eval_data_path
    group = training.process_group()

    def say(line: str) -> None:
        if group.is_main_process:
            log(line)

    say(
        f"transformers backend: {config.algorithm} on {group.num_processes} process(es), "
        f"{group.backend or 'single process'} on {group.device}"
    )
    server = progress_server.start_for_run(run_config, group.process_index, log=say)
    tracker = start_tracking(run_config, say) if group.is_main_process else tracking.MlflowLogger("", environ={})
    tracker.log_params({**dataclasses.asdict(config), "world_size": group.num_processes})
    succeeded = False
    try:
        with tracker:  # ends the MLflow run: FINISHED, KILLED (SIGTERM's exit 143) or FAILED
            result = training.train(
                config,
                ckpt_dir,
                model_path,
                read_jsonl_rows(Path(run_config.data_path)),
                read_jsonl_rows(Path(eval_path)) if eval_path else None,
                data_label=run_config.data_path,
                log=say,
                on_step=tracker.log_step,
                checkpoint_on_sigterm=run_config.jit_checkpoint,
            )
            if group.is_main_process:
                write_result(ckpt_dir, result, group.device)
        succeeded = True
    finally:
        if server is not None:
            server.stop(succeeded, run_config.progress.termination_log)
        group.destroy_process_group()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``launch.py --config <run_config.json>`` (the pod command); with ``--model-path``, one worker (torchrun's)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--model-path", default="")
    args = parser.parse_args(argv)
    if not args.model_path:
        return launch(args.config)
    return run(load_run_config(args.config), args.model_path, log=lambda line: print(line, flush=True))


if __name__ == "__main__":
    sys.exit(main())
