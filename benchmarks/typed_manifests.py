"""Plain-dict manifest builders vs the typed models of ``kubeflow-trainer-api`` / ``kubeflow-training`` (same run).

Usage: ``python benchmarks/typed_manifests.py [--typed-path DIR] [--runs 2000]``. The typed-model packages are not
dependencies of this project (the README says why); install them aside, e.g.
``pip install --target /tmp/typed kubeflow-trainer-api==2.3.0 kubeflow-training==1.9.4``, and pass that directory.
It prints, for the launcher pod: the import time of the dict builders from the checkout (as the step image carries
it) and of the typed models, the time to build one TrainJob as a dict and to round-trip it through the typed model,
whether the round trip returns the same dict, and the size of the typed packages a launcher would have to pip-install.
"""

import argparse
import json
import subprocess
import sys
import timeit
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))


def _import_seconds(statement: str, path: str, repeats: int = 3) -> float:
    """The best of ``repeats`` fresh interpreters' time to run ``statement`` with ``path`` first on ``sys.path``."""
    code = f"import sys, time; sys.path.insert(0, {path!r}); t = time.perf_counter(); {statement}; "
    code += "print(time.perf_counter() - t)"
    runs = [float(subprocess.check_output([sys.executable, "-I", "-c", code], text=True)) for _ in range(repeats)]
    return min(runs)


def _size_mb(*paths: Path) -> float:
    return sum(f.stat().st_size for p in paths if p.exists() for f in p.rglob("*") if f.is_file()) / 1e6


def main() -> None:
    """Measures and prints the figures (JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--typed-path", default="/tmp/typed", help="where the typed-model packages are installed")
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--write-figures", action="store_true", help="record the figures in docs/figures.json")
    args = parser.parse_args()

    from components.training.finetuning.manifests.trainjob import build_trainjob
    from tests.harness.requests import job_spec

    spec = job_spec(
        run_id="run-1",
        task_name="train-model",
        namespace="team-a",
        command=["python", "/w/entrypoint.py"],
        args=["--config", "/w/run_config.json"],
        image="quay.io/example/trainer:1",
        num_nodes=2,
        gpus_per_node=4,
        cpu_per_node="8",
        memory_per_node="64Gi",
        volumes=[{"name": "ws", "persistentVolumeClaim": {"claimName": "ws"}}],
        volume_mounts=[{"name": "ws", "mountPath": "/w"}],
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    )
    manifest = build_trainjob(spec)
    figures: dict[str, object] = {
        "build_dict_us": round(timeit.timeit(lambda: build_trainjob(spec), number=args.runs) / args.runs * 1e6, 1)
    }
    figures["import_dict_builders_s"] = round(
        _import_seconds(
            "import components.training.finetuning.manifests.trainjob, "
            "components.training.finetuning.manifests.pytorchjob",
            str(REPO_ROOT),
        ),
        3,
    )
    typed = Path(args.typed_path)
    if not (typed / "kubeflow_trainer_api").is_dir():
        figures["typed"] = f"not installed under {typed} (see the docstring); dict figures only"
        print(json.dumps(figures, indent=1))
        return
    figures["import_trainer_api_trainjob_model_s"] = round(
        _import_seconds(
            "from kubeflow_trainer_api.models.trainer_v1alpha1_train_job import TrainerV1alpha1TrainJob", str(typed)
        ),
        3,
    )
    figures["import_kubeflow_training_pytorchjob_model_s"] = round(
        _import_seconds("from kubeflow.training.models import KubeflowOrgV1PyTorchJob", str(typed)), 3
    )
    sys.path.insert(0, str(typed))
    from kubeflow_trainer_api.models.trainer_v1alpha1_train_job import TrainerV1alpha1TrainJob

    def round_trip() -> dict:
        return TrainerV1alpha1TrainJob.from_dict(manifest).to_dict()

    figures["round_trip_typed_us"] = round(timeit.timeit(round_trip, number=args.runs) / args.runs * 1e6, 1)
    figures["round_trip_equal"] = round_trip() == manifest
    figures["typed_install_mb"] = round(
        _size_mb(
            typed / "kubeflow_trainer_api", typed / "kubeflow" / "training", typed / "pydantic", typed / "pydantic_core"
        ),
        1,
    )
    figures["ratio_typed_vs_dict_build"] = round(figures["round_trip_typed_us"] / figures["build_dict_us"], 1)
    print(json.dumps(figures, indent=1))
    if args.write_figures:
        from scripts.figures import figure, record

        units = {"_us": "µs", "_s": "s", "_mb": "MB", "ratio_": "x"}
        record(
            {
                f"typed_manifests.{name}": figure(value, next(u for k, u in units.items() if k in name))
                for name, value in figures.items()
                if isinstance(value, float)
            },
            "benchmarks/typed_manifests.py",
        )


if __name__ == "__main__":
    main()
