"""``kfp-finetune``: compile, run locally, validate data, check a cluster, and upload/run/schedule on a KFP server.

Exit codes: 0 success, 1 the work failed (e.g. invalid data, a failed run), 2 bad usage or bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipelines.training.finetuning import PIPELINES

#: The steps with their own resources (``--<step>-cpu-request`` ...).
STEP_MEANINGS = {
    "dataset": "dataset download/validation",
    "launcher": "training launcher (train_model, not the training pods)",
    "eval": "evaluation",
    "registry": "model registry",
}
#: The pipeline ``kfp-finetune doctor`` checks when none is named (the guide's quick start).
DOCTOR_DEFAULT_PIPELINE = "osft-minimal"


def _add_compile_settings(parser: argparse.ArgumentParser) -> None:
    """Flags of the compile-time settings (each also readable from ``KFP_FINETUNE_<NAME>``)."""
    group = parser.add_argument_group(
        "compile-time settings (default: KFP_FINETUNE_<NAME> env vars, then the pipeline.py constants); also "
        "--<step>-cpu-request/-cpu-limit/-memory-request/-memory-limit QUANTITY for step dataset|launcher|eval|registry"
    )
    group.add_argument("--pvc-size", help="workspace PVC size, e.g. 50Gi")
    group.add_argument("--pvc-storage-class", help="workspace PVC storage class ('' = cluster default)")
    group.add_argument("--pvc-access-modes", help="comma-separated, e.g. ReadWriteMany")
    group.add_argument("--pipeline-name", help="name of the compiled pipeline")
    group.add_argument(
        "--image",
        metavar="REF",
        help="image of every step, built from the Containerfile (e.g. your ImageStream: "
        "image-registry.openshift-image-registry.svc:5000/<namespace>/kfp-finetune:latest); "
        "default: the project's published step image of this version",
    )
    group.add_argument(
        "--eval-image",
        metavar="REF",
        help="image of the evaluation step (a Containerfile build with CUDA torch when it requests GPUs); "
        "default: --image if given, else the published CUDA step image (the CPU one with --eval-gpus 0)",
    )
    for step in STEP_MEANINGS:
        for kind in ("cpu-request", "cpu-limit", "memory-request", "memory-limit"):
            group.add_argument(f"--{step}-{kind}", metavar="QUANTITY", help=argparse.SUPPRESS)
    group.add_argument(
        "--eval-gpus", type=int, help="accelerators of the evaluation step (default 1; 0 = CPU only, no node selector)"
    )
    group.add_argument("--eval-gpu-resource", help="extended resource of the evaluation step (default nvidia.com/gpu)")
    group.add_argument(
        "--eval-node-selector",
        help="key=value node selector of the evaluation step (default nvidia.com/gpu.present=true)",
    )
    for secret, meaning in (
        ("kubernetes-credentials-secret", "KUBERNETES_SERVER_URL / KUBERNETES_AUTH_TOKEN"),
        ("s3-secret", "the data connection's AWS_* keys"),
        ("hf-token-secret", "HF_TOKEN"),
        ("oci-pull-secret", "OCI_PULL_SECRET_MODEL_DOWNLOAD or .dockerconfigjson (config.json) for oci:// models"),
    ):
        group.add_argument(f"--{secret}", help=f"name of the (optional) secret with {meaning}")


def _add_image_check(parser: argparse.ArgumentParser) -> None:
    """Flags of the check that every image the pipeline names can be pulled (``pipelines/images/pull_check.py``)."""
    group = parser.add_argument_group("image check (the registries' manifest endpoints; unreachable = a warning)")
    group.add_argument(
        "--no-image-check",
        action="store_true",
        help="do not ask the registries whether the pipeline's images exist (also: KFP_FINETUNE_NO_IMAGE_CHECK=1)",
    )
    group.add_argument(
        "--pull-secret-file",
        default="",
        metavar="CONFIG_JSON",
        help="Docker config.json (or podman auth.json) with credentials for private registries, as the cluster's "
        "pull secret holds them",
    )


def _add_connection(parser: argparse.ArgumentParser) -> None:
    """Flags of the KFP server connection."""
    group = parser.add_argument_group("KFP server")
    group.add_argument("--host", default="", help="KFP API URL (default: KFP_HOST)")
    group.add_argument(
        "--token-file",
        default="",
        help="file holding a bearer token, e.g. from `oc whoami -t` (default: the KFP_TOKEN env var)",
    )
    group.add_argument("--namespace", default="", help="namespace (multi-user KFP)")
    group.add_argument("--ca-bundle", default="", help="CA bundle to verify the server's certificate")
    group.add_argument("--insecure-skip-tls-verify", action="store_true", help="do not verify TLS (not recommended)")
    group.add_argument(
        "--request-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long one API request may wait for an answer (default: 60)",
    )


def _add_parameter_values(parser: argparse.ArgumentParser, what: str = "a pipeline argument") -> None:
    """``--param NAME=VALUE`` (repeatable) and ``--params-file``: the pipeline arguments of a run."""
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=f"{what} (VALUE parsed as JSON when possible); repeatable",
    )
    parser.add_argument("--params-file", default="", help="YAML or JSON file of pipeline arguments")


def dataset_step_defaults() -> dict[str, object]:
    """The dataset component's parameters with defaults, read from its ``component.py`` source without running it.

    Importing the component (KFP, the Kubernetes client, the component's build) takes seconds and ~130 MiB; the
    ``validate-dataset`` CLI is measured against a bare ``json.loads`` loop (``benchmarks/validate_dataset.py``), so
    it reads the one ``def dataset_download(...)`` signature with :mod:`ast` (literal defaults only).
    ``tests/test_cli.py`` checks the result against the imported component's signature.
    """
    import ast

    from components.data_processing.dataset_download import run as dataset_run

    source = Path(dataset_run.__file__).with_name("component.py")
    tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
    [function] = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "dataset_download"]
    arguments = function.args.args[len(function.args.args) - len(function.args.defaults) :]
    defaults: dict[str, object] = {}
    for argument, node in zip(arguments, function.args.defaults, strict=True):
        try:
            defaults[argument.arg] = ast.literal_eval(node)
        except ValueError:  # a non-literal default (an artifact's None is literal): not a CLI option
            continue
    return {name: value for name, value in defaults.items() if isinstance(value, (bool, int, float, str))}


def _add_dataset_options(parser: argparse.ArgumentParser) -> None:
    """One flag per option of the dataset step (``dataset_download``), with the component's defaults and docs."""
    from components.data_processing.dataset_download.parameter_docs import PARAMETER_DOCS

    described = {name: " ".join(text.split()) for name, text in PARAMETER_DOCS.items()}
    group = parser.add_argument_group("dataset step options (as in the pipelines' phase 01 parameters)")
    for name, default in dataset_step_defaults().items():
        flag = f"--{name.replace('_', '-')}"
        help_text = f"{described.get(name, '')} (default: {default!r})".lstrip()
        if isinstance(default, bool):
            group.add_argument(flag, dest=name, action="store_true", default=default, help=help_text)
        else:
            group.add_argument(flag, dest=name, type=type(default), default=default, help=help_text)


def build_parser(dataset_options: bool = True) -> argparse.ArgumentParser:
    """The ``kfp-finetune`` argument parser.

    Args:
        dataset_options: Add ``validate-dataset``'s options, read from the dataset component's code (its parameter
            descriptions import part of the components), so :func:`main` asks for them only when the command is
            ``validate-dataset``.
    """
    parser = argparse.ArgumentParser(prog="kfp-finetune", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    compile_ = sub.add_parser(
        "compile",
        help="compile pipelines to YAML",
        description="Compiles pipelines to KFP YAML for the RHOAI dashboard's Import pipeline, with the compile-time "
        "settings (PVC, images, resources, secrets' names) from the pipeline.py constants, KFP_FINETUNE_* variables "
        "and these flags, in that order.",
    )
    compile_.add_argument("names", nargs="*", metavar="PIPELINE", help=f"one or more of: {', '.join(PIPELINES)}")
    compile_.add_argument("--all", action="store_true", help="compile every pipeline")
    compile_.add_argument(
        "-o",
        "--output",
        type=Path,
        help="output file (one pipeline) or directory (several); default: pipeline.yaml beside each pipeline module",
    )
    _add_compile_settings(compile_)
    _add_image_check(compile_)

    images = sub.add_parser(
        "images",
        help="list every image the pipelines and their training runtimes use (an oc-mirror ImageSetConfiguration)",
        description="Compiles the pipelines (all six, or those named; or reads compiled YAMLs) with the compile-time "
        "settings and prints every image they and the Trainer runtimes they target use, for mirroring into a "
        "disconnected cluster.",
    )
    images.add_argument(
        "pipelines", nargs="*", metavar="PIPELINE", help="pipeline names or compiled YAML files (default: all six)"
    )
    images.add_argument(
        "--format",
        choices=("imageset", "list"),
        default="imageset",
        help="an oc-mirror v2 ImageSetConfiguration (default) or one image per line",
    )
    images.add_argument(
        "--resolve-digests",
        action="store_true",
        help="ask each registry for the image's digest and pin it (default: only the digests the references carry)",
    )
    images.add_argument("--no-runtimes", action="store_true", help="leave out the Trainer runtimes' images")
    images.add_argument("--pull-secret-file", default="", metavar="CONFIG_JSON", help="credentials for the digests")
    _add_compile_settings(images)

    demo = sub.add_parser(
        "demo",
        help="run a whole pipeline locally on a tiny model (kfp.local, CPU)",
        description="Runs the expert pipeline of ALGORITHM through kfp.local on a tiny model built here: download and "
        "validate the data, evaluate the base model, train on CPU, evaluate the fine-tuned model against it, "
        "register (only with --registry-address); then tells what it gained and what it forgot. Offline unless the "
        "dataset is a Hub id and the Hub answers.",
    )
    demo.add_argument("--algorithm", choices=("sft", "osft", "lora", "grpo", "lora_grpo"), default="sft")
    demo.add_argument("--output-dir", type=Path, default=Path("kfp-finetune-demo"))
    demo.add_argument(
        "--dataset-uri",
        default="",
        help="training data: a path, s3://, http(s):// or a Hub id such as LipengCS/Table-GPT:All (downloaded when "
        "the Hub answers; default: the shipped demo dataset)",
    )
    demo.add_argument(
        "--offline", action="store_true", help="never reach the Hugging Face Hub (a Hub dataset must be cached)"
    )
    demo.add_argument("--registry-address", default="", help="register the model there (default: skipped)")
    demo.add_argument(
        "--modelcar-uri",
        default="",
        help="publish the model as an OCI modelcar there, e.g. oci://localhost:5000/demo/tiny:1",
    )
    demo.add_argument(
        "--modelcar-base-image", default="", help="the image the modelcar is layered on (registry/repo:tag)"
    )
    demo.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show every line the steps print (always written to OUTPUT_DIR/demo.log)",
    )

    validate = sub.add_parser(
        "validate-dataset",
        help="run the dataset step locally (download, validate, split, token statistics); print its report",
        description="Runs the pipelines' dataset step on this machine: downloads URI, converts it to the chat "
        "format, checks every row, splits it, and prints the report; exit 1 when the rows fail the rules.",
    )
    validate.add_argument("uri", help="dataset URI (HF id, s3://, http(s)://, pvc:// or a local path)")
    if dataset_options:
        _add_dataset_options(validate)
    validate.add_argument(
        "--output-dir", type=Path, default=None, help="keep the train/eval split there (default: not kept)"
    )

    doctor = sub.add_parser(
        "doctor",
        help="check a cluster and namespace before a run: print what is missing and how to fix it",
        description="Checks the training launcher, permissions, storage, secrets, GPUs and endpoints one run of "
        "PIPELINE needs; one line per check, 'OK | WARN | FAIL  <what>  — <remedy>'. Exit 0 when nothing FAILs.",
    )
    doctor.add_argument(
        "pipeline",
        nargs="?",
        default=DOCTOR_DEFAULT_PIPELINE,
        help=f"a pipeline name or a compiled YAML file (default: {DOCTOR_DEFAULT_PIPELINE})",
    )
    doctor.add_argument("--namespace", default="", help="the Data Science Project (default: the kubeconfig context's)")
    _add_parameter_values(doctor, "a pipeline argument of the run to check")
    doctor.add_argument("--json", action="store_true", help="print the report as JSON")
    doctor.add_argument(
        "--kfp-host", default="", help="KFP API URL to health-check (default: KFP_HOST; unset: skipped)"
    )
    doctor.add_argument("--token-file", default="", help="file with the KFP bearer token (default: KFP_TOKEN)")
    doctor.add_argument("--ca-bundle", default="", help="CA bundle for the KFP API and Model Registry certificates")
    _add_compile_settings(doctor)
    _add_image_check(doctor)

    for name, help_text, description in (
        (
            "upload",
            "upload a pipeline to a KFP server",
            "Compiles PIPELINE (or takes a compiled YAML) and uploads it to the KFP API at --host, as a new pipeline "
            "or a new version of it.",
        ),
        (
            "run",
            "start a run",
            "Checks the arguments against the pipeline and its components' rules, then starts one run of PIPELINE "
            "on the KFP API at --host.",
        ),
        (
            "schedule",
            "create a recurring run",
            "Checks the arguments as run does, then creates a recurring run of PIPELINE (--cron or --interval) on "
            "the KFP API at --host.",
        ),
    ):
        command = sub.add_parser(name, help=help_text, description=description)
        command.add_argument("pipeline", help="a pipeline name (e.g. osft-minimal) or a compiled YAML file")
        _add_connection(command)
        _add_compile_settings(command)
        _add_image_check(command)
        if name == "upload":
            command.add_argument("--name", default="", help="pipeline name on the server (default: PIPELINE)")
            command.add_argument("--version", default="", help="version name (default: a timestamp)")
            command.add_argument("--description", default="")
        else:
            _add_parameter_values(command)
            command.add_argument("--experiment", default="Default", help="experiment name")
            command.add_argument(
                "--run-name" if name == "run" else "--name",
                default="",
                help="run name" if name == "run" else "recurring run name (default: PIPELINE)",
            )
        if name == "schedule":
            when = command.add_mutually_exclusive_group(required=True)
            when.add_argument("--cron", default="", help="6-field cron with seconds, e.g. '0 0 2 * * *'")
            when.add_argument("--interval", type=int, default=None, metavar="SECONDS", help="run every N seconds")
            command.add_argument("--max-concurrency", type=int, default=1)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs ``kfp-finetune``; returns the exit code."""
    from pipelines.commands import COMMANDS

    argv = sys.argv[1:] if argv is None else argv
    command = argv[0] if argv else ""
    try:
        args = build_parser(dataset_options=command == "validate-dataset").parse_args(argv)
        command = args.command
        return COMMANDS[command](args)
    except ModuleNotFoundError as error:  # an extra's package in the core install: say which extra, no traceback
        from pipelines.commands import missing_extra_message

        message = str(error) if str(error).startswith("kfp-finetune ") else missing_extra_message(command, error.name)
        print(message, file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError) as error:  # bad input: usage, parameters, files
        print(f"kfp-finetune {command}: error: {error}", file=sys.stderr)
        return 2
    except RuntimeError as error:  # the work failed: a server refused, a local run failed
        print(f"kfp-finetune {command}: failed: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
