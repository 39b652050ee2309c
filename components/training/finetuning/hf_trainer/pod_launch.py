"""The ``transformers`` backend's pod command (``launch.py``): resolves the base model, then ``exec`` s torchrun.

``exec``: the pod's SIGTERM reaches torchrun's agent and through it the workers, which checkpoint and exit.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from components.training.finetuning.contract import load_run_config
from components.training.finetuning.pod import entrypoint, inputs

WORKER_SCRIPT = "worker.py"  # staged beside this one


def missing_trainer_packages(algorithm: str) -> list[str]:
    """The packages (as ``pip`` names them) the trainer core needs for ``algorithm`` that are absent."""
    import importlib.util

    needed = ["torch", "transformers", "accelerate", "trl", "datasets"]
    needed += {"lora": ["peft"], "lora_grpo": ["peft"], "osft": ["mini_trainer"]}.get(algorithm, [])
    pip_names = {"mini_trainer": "rhai-innovation-mini-trainer"}
    return [pip_names.get(module, module) for module in needed if importlib.util.find_spec(module) is None]


def torchrun_argv(
    nproc_per_node: int, env: Mapping[str, str], worker: Path, config_path: Path, model_path: str
) -> list[str]:
    """This node's ``torchrun`` argv: a static rendezvous at the master address, no restarts (the controller's job).

    Raises:
        EntrypointError: A controller variable is malformed.
    """
    kwargs = entrypoint.torchrun_kwargs(env, nproc_per_node)
    argv = [sys.executable, "-m", "torch.distributed.run", "--max-restarts=0"]
    argv.append(f"--nnodes={kwargs.get('nnodes', 1)}")
    argv.append(f"--nproc-per-node={kwargs.get('nproc_per_node', nproc_per_node or 1)}")
    argv.append(f"--node-rank={kwargs.get('node_rank', 0)}")
    if kwargs.get("rdzv_endpoint"):
        address, _, port = str(kwargs["rdzv_endpoint"]).rpartition(":")
        argv += [f"--master-addr={address}", f"--master-port={port}"]
    return [*argv, str(worker), "--config", str(config_path), "--model-path", model_path]


def main(argv: list[str] | None = None) -> int:
    """Resolves the model, then replaces this process by ``torchrun`` running the worker."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, type=Path)
    args = parser.parse_args(argv)
    run_config = load_run_config(args.config)
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
    command = torchrun_argv(run_config.nproc_per_node, env, worker, args.config, model_path)
    print("transformers backend: " + " ".join(command[1:]), flush=True)
    os.execv(command[0], command)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
