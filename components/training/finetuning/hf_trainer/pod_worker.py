"""One ``torchrun`` worker of the ``transformers`` backend: a rank of :func:`.training.train`.

Rank 0 alone writes the metrics, checkpoints, final model, :data:`RESULT_FILE` and MLflow, and serves progress.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from components._common.files import write_text_atomically
from components.training.finetuning import tracking
from components.training.finetuning.contract import RunConfig, load_run_config
from components.training.finetuning.hf_trainer import training
from components.training.finetuning.hf_trainer.data import read_jsonl_rows
from components.training.finetuning.pod import progress_server

#: Written by rank 0 into ``ckpt_output_dir`` when training ends.
RESULT_FILE = "result.json"


def start_tracking(run_config: RunConfig, log: Callable[[str], None]) -> tracking.MlflowLogger:
    """The pods' MLflow run, keyed by its name (a resumed job continues it); a no-op without URI or ``mlflow``."""
    import importlib.util

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


def write_result(ckpt_dir: Path, result: training.TrainingResult, device: Any = None) -> Path:
    """Writes :data:`RESULT_FILE` (rank 0; with the peak GPU memory of this rank on CUDA) and returns it."""
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
    """``worker.py --config <run_config.json> --model-path <model>`` (started by torchrun)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, type=Path)
    parser.add_argument("--model-path", required=True)
    args = parser.parse_args(argv)
    return run(load_run_config(args.config), args.model_path, log=lambda line: print(line, flush=True))


if __name__ == "__main__":
    sys.exit(main())
