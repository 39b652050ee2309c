"""The bytes a run moves per step, with the weights copied into the artifact store (before) and read in place (after).

Usage: ``python benchmarks/model_trip.py [--sizes 0.1,1,4] [--root DIR]``. Check the free space first
(``df -h /tmp``): the 4 GB case needs about 13 GB at its peak (workspace, artifact copy, S3 upload).

For each model size it writes a real safetensors model of zeros (``config.json``, ``tokenizer.json``,
``model.safetensors``) and runs the three steps that touch the trained weights, twice:

* **before**: ``training_copy_model_to_artifact=True`` (every run's behaviour before issue 44): ``train_model`` copies
  the checkpoint into its ``Model`` artifact, the evaluation and registry steps read that artifact's files;
* **after**: the default: the artifact holds the manifest; the steps resolve it
  (:func:`components._common.model_location.resolve_model_dir`) and read the weights on the workspace.

The steps: ``train_model`` itself (``run_train_model``, launcher ``trainjob``) against the Kubernetes emulator
(tests/harness kmock), whose stand-in for the TrainJob's pods "writes" the checkpoint onto the workspace (a child
process, so its writes are not the launcher's); the fine-tuned evaluation's model access (the model located as
``lm_eval`` does, then every weight byte read once, as loading the model reads it; lm-eval's scoring itself does not
depend on where the files were); the registry's S3 upload (``model_files_dir`` + ``upload_model_files``, the
component's own code, to a moto S3 server in its own process). They run in this process through the components'
functions rather than under ``kfp.local``, whose tasks get no ``TaskConfig`` volumes (the TrainJob launcher needs
the workspace mount); KFP's artifact traffic is accounted from the artifact directories, as a cluster moves it: the
launcher uploads each output artifact to the pipeline root and downloads each input artifact whole into the pod
before the step starts (``kfp.local`` reads them in place).

Per step: artifact store bytes (uploaded + downloaded), bytes written to the workspace, bytes read (``rchar`` of
``/proc/self/io``: files and sockets), bytes uploaded to S3, and the peak local disk (sampled every 20 ms: the step's
output artifacts and temporary directory, plus its downloaded input artifacts). Targets: weights through the artifact
store <= 1 % of the model size (manifests only with the copy off), each step's local disk <= 100 MB at any size.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GB = 10**9
MB = 10**6
NS = "bench"
TARGET_LOCAL_DISK = 100 * MB
TARGET_STORE_FRACTION = 0.01
CHUNK = 64 * 2**20


def write_model(directory: Path, size: int) -> None:
    """A safetensors model of ``size`` bytes of zeros (one U8 tensor) with its config and tokenizer files."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    (directory / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"type": "BPE"}}))
    header = json.dumps({"weights": {"dtype": "U8", "shape": [size], "data_offsets": [0, size]}}).encode()
    header += b" " * (-len(header) % 8)
    zeros = bytes(CHUNK)
    with (directory / "model.safetensors").open("wb") as handle:
        handle.write(struct.pack("<Q", len(header)) + header)
        for start in range(0, size, CHUNK):
            handle.write(zeros[: min(CHUNK, size - start)])


def tree_bytes(*paths: Path) -> int:
    """The bytes of the files under ``paths`` (missing paths count 0)."""
    total = 0
    for path in paths:
        if path.is_file():
            total += path.stat().st_size
        elif path.is_dir():
            total += sum(item.stat().st_size for item in path.rglob("*") if item.is_file() and not item.is_symlink())
    return total


def read_chars() -> int:
    """``rchar`` of this process: bytes read through read(2) and friends, files and sockets."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    return 0


@contextlib.contextmanager
def peak_of(paths: list[Path], baseline: int = 0):
    """Samples the bytes under ``paths`` every 20 ms during the block; ``result["peak"]`` (plus ``baseline``)."""
    result = {"peak": 0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            result["peak"] = max(result["peak"], tree_bytes(*paths))
            stop.wait(0.02)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield result
    finally:
        stop.set()
        thread.join()
        result["peak"] = max(result["peak"], tree_bytes(*paths)) + baseline


def read_every_byte(directory: Path) -> None:
    """Reads each file under ``directory`` once (what loading a model does), streaming."""
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            with path.open("rb") as handle:
                while handle.read(CHUNK):
                    pass


def play_the_training_job(kube_api, workspace: Path, size: int) -> None:
    """Stands in for the TrainJob's pods: writes the checkpoint and metrics onto the workspace, then completes it."""
    from tests.harness.kube import condition

    job = kube_api.wait_for(lambda: kube_api.objects("trainjobs", NS), timeout=60)[0]
    config = json.loads(next(workspace.glob("train_model/*/run_config.json")).read_text())
    ckpt = Path(config["ckpt_output_dir"])
    final = ckpt / "hf_format" / "samples_64.0"
    subprocess.run([sys.executable, __file__, "--write-model", str(final), str(size)], check=True, timeout=1800)
    with (ckpt / "training_metrics_0.jsonl").open("w") as handle:
        handle.write(json.dumps({"step": 1, "epoch": 0, "loss": 1.0, "tokens_per_second": 1.0}) + "\n")
    kube_api.set_trainjob_status(NS, job["metadata"]["name"], {"conditions": [condition("Complete")]})


def train_step(kube_api, root: Path, size: int, copy: bool, dataset: Path) -> tuple[dict, object]:
    """``train_model`` with the TrainJob launcher; the emulated job writes the checkpoint on the workspace."""
    from kfp import dsl

    from components.training.finetuning.run import run_train_model
    from tests.harness.requests import train_model_request

    workspace, store, scratch = root / "kfp-workspace", root / "pipeline-root" / "train-model", root / "tmp-train"
    scratch.mkdir(parents=True)
    outputs = {
        "model": dsl.Model(uri=str(store / "output_model")),
        "metrics": dsl.Metrics(uri=str(store / "output_metrics")),
        "report": dsl.HTML(uri=str(store / "output_loss_chart")),
    }
    task_config = dsl.TaskConfig(
        volumes=[{"name": "kfp-workspace", "persistentVolumeClaim": {"claimName": "bench-kfp-workspace"}}],
        volume_mounts=[{"name": "kfp-workspace", "mountPath": str(workspace)}],
    )
    request = train_model_request(
        dataset=dsl.Dataset(uri=str(dataset)),
        task_config=task_config,
        training_base_model="/models/base",  # the pods' business: never read by the launcher
        training_launcher="trainjob",
        training_namespace=NS,
        training_progress_tracking=False,
        training_copy_model_to_artifact=copy,
        pvc_path=str(workspace),
        run_id="bench-run",
        task_name="train-model",
    )
    workspace_before, chars = tree_bytes(workspace), read_chars()
    tempfile.tempdir = str(scratch)
    try:
        with (
            peak_of([store, scratch]) as peak,
            kube_api.in_background(lambda: play_the_training_job(kube_api, workspace, size)),
        ):
            run_train_model(
                request, **outputs, api_client=kube_api.api_client, log=lambda line: None,
                job_options={"poll_interval_seconds": 0.2},
            )  # fmt: skip
    finally:
        tempfile.tempdir = None
    return {
        "store": tree_bytes(store),
        "workspace": tree_bytes(workspace) - workspace_before,
        "read": read_chars() - chars,
        "s3": 0,
        "disk": peak["peak"],
    }, outputs["model"]


def eval_step(model, root: Path, copy: bool) -> dict:
    """The fine-tuned evaluation's model access: KFP's download of the input artifact, the model located, read once."""
    from components._common.model_location import resolve_model_dir

    downloaded = tree_bytes(Path(model.path))  # KFP's launcher downloads the whole input artifact first
    chars = read_chars()
    with peak_of([], baseline=downloaded) as peak:
        read_every_byte(Path(model.path) if copy else resolve_model_dir(model.path))  # before: today's model.path
    return {"store": downloaded, "workspace": 0, "read": read_chars() - chars, "s3": 0, "disk": peak["peak"]}


def registry_step(model, root: Path, copy: bool, endpoint: str, environ: dict) -> dict:
    """The registry's S3 upload (its own code) from the artifact's files (before) or the workspace (after)."""
    from components._common.s3 import s3_client
    from components.deployment.kubeflow_model_registry.lineage import ArtifactInfo
    from components.deployment.kubeflow_model_registry.model_uri import model_files_dir, upload_model_files

    info = ArtifactInfo(model.uri, model.path, dict(model.metadata))
    downloaded = tree_bytes(Path(model.path))
    source = Path(model.path) if copy else model_files_dir(info)
    client = s3_client(environ, purpose="benchmark")
    prefix = f"s3://bench/model-{'before' if copy else 'after'}"
    chars = read_chars()
    with peak_of([], baseline=downloaded) as peak:
        upload_model_files(source, prefix, lambda line: None, client)
    read = read_chars() - chars
    listed = client.list_objects_v2(Bucket="bench", Prefix=prefix.split("/", 3)[3] + "/").get("Contents", [])
    for item in listed:
        client.delete_object(Bucket="bench", Key=item["Key"])
    uploaded = sum(item["Size"] for item in listed)
    return {"store": downloaded, "workspace": 0, "read": read, "s3": uploaded, "disk": peak["peak"]}


@contextlib.contextmanager
def moto_server(scratch: Path):
    """A moto S3 server in its own process (its writes are not the steps'); yields the data-connection env."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    scratch.mkdir(parents=True, exist_ok=True)
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env={**os.environ, "TMPDIR": str(scratch)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    environ = {
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench-secret",
        "AWS_S3_ENDPOINT": endpoint,
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the moto S3 server did not start")
            time.sleep(0.2)
        from components._common.s3 import s3_client

        s3_client(environ, purpose="benchmark").create_bucket(Bucket="bench")
        yield endpoint, environ
    finally:
        server.terminate()
        server.wait(timeout=30)


def run_case(size: int, copy: bool, root: Path, dataset: Path, endpoint: str, environ: dict) -> dict[str, dict]:
    """One model size, one mode: the three steps' figures."""
    from tests.harness.kube import running_kube_api

    with running_kube_api() as kube_api:
        kube_api.create_runtime("training-hub")
        train, model = train_step(kube_api, root, size, copy, dataset)
    return {
        "train_model": train,
        "lm_eval (fine-tuned)": eval_step(model, root, copy),
        "model_registry (S3 upload)": registry_step(model, root, copy, endpoint, environ),
    }


def _figure(count: int) -> str:
    if count >= GB:
        return f"{count / GB:.2f} GB"
    return f"{count / MB:.1f} MB" if count >= MB else f"{count / 1e3:.1f} kB"


def table(results: dict[float, dict[str, dict[str, dict]]]) -> list[str]:
    """The Markdown table, one row per size, mode and step, and the targets' verdicts."""
    lines = [
        "| model | mode | step | artifact store (up + down) | written to the workspace | read | uploaded to S3 | "
        "peak local disk |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for gigabytes, modes in results.items():
        for mode, steps in modes.items():
            for step, figures in steps.items():
                cells = [figures[key] for key in ("store", "workspace", "read", "s3", "disk")]
                lines.append(f"| {gigabytes:g} GB | {mode} | {step} | " + " | ".join(map(_figure, cells)) + " |")
    return lines


def verdicts(results: dict[float, dict[str, dict[str, dict]]]) -> list[str]:
    """Whether each size's ``after`` run met the targets (store <= 1 % of the size, every step's disk <= 100 MB)."""
    lines = []
    for gigabytes, modes in results.items():
        after = modes["after"]
        store = sum(figures["store"] for figures in after.values())
        disk = max(figures["disk"] for figures in after.values())
        met = store <= TARGET_STORE_FRACTION * gigabytes * GB and disk <= TARGET_LOCAL_DISK
        lines.append(
            f"{gigabytes:g} GB after: artifact store {_figure(store)} ({store / (gigabytes * GB):.4%} of the model), "
            f"largest step disk {_figure(disk)}: targets {'met' if met else 'NOT met'}"
        )
    return lines


def main(argv: list[str] | None = None) -> dict[float, dict[str, dict[str, dict]]]:
    """Runs every size before and after; prints the table and the verdicts; returns the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0.1,1,4", help="model sizes in GB, comma-separated")
    parser.add_argument("--root", default="", help="scratch directory (default: a temporary one, removed)")
    parser.add_argument("--write-model", nargs=2, metavar=("DIR", "BYTES"), help=argparse.SUPPRESS)
    parser.add_argument("--write-figures", action="store_true", help="record the README's figures in docs/figures.json")
    args = parser.parse_args(argv)
    if args.write_model:
        write_model(Path(args.write_model[0]), int(args.write_model[1]))
        return {}
    from pipelines.demo.demo_data import DEMO_DATASET_PATH

    results: dict[float, dict[str, dict[str, dict]]] = {}
    with tempfile.TemporaryDirectory(prefix="model-trip-", dir=args.root or None) as scratch:
        with moto_server(Path(scratch) / "moto") as (endpoint, environ):
            for gigabytes in [float(value) for value in args.sizes.split(",")]:
                results[gigabytes] = {}
                for mode, copy in (("before", True), ("after", False)):
                    root = Path(scratch) / f"{gigabytes:g}-{mode}"
                    started = time.monotonic()
                    results[gigabytes][mode] = run_case(
                        int(gigabytes * GB), copy, root, Path(DEMO_DATASET_PATH), endpoint, environ
                    )
                    shutil.rmtree(root, ignore_errors=True)
                    print(f"{gigabytes:g} GB {mode}: {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    print("\n".join(table(results)))
    print()
    print("\n".join(verdicts(results)))
    if args.write_figures:
        from scripts.figures import record

        record(figures(results), "benchmarks/model_trip.py")
    return results


def figures(results: dict[float, dict[str, dict[str, dict]]]) -> dict[str, dict]:
    """The README's figures: the table, the verdicts, and ``after``'s artifact store and largest step disk."""
    from scripts.figures import figure

    store = {gigabytes: sum(f["store"] for f in modes["after"].values()) for gigabytes, modes in results.items()}
    disk = max(f["disk"] for modes in results.values() for f in modes["after"].values())
    found = {
        "trip.table": figure(len(table(results)) - 2, "rows", "\n".join(table(results))),
        "trip.verdicts": figure(len(verdicts(results)), "lines", "\n".join(verdicts(results))),
        "trip.after.store": figure(max(store.values()), "bytes", _figure(max(store.values())).removesuffix(" kB")),
        "trip.after.disk": figure(disk, "bytes", _figure(disk).removesuffix(" kB")),
    }
    for gigabytes, stored in store.items():
        share = 100 * stored / (gigabytes * GB)
        found[f"trip.after.store_share.{gigabytes:g}"] = figure(share, "%", f"{share:.1g}")
    return found


if __name__ == "__main__":
    main()
