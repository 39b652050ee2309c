"""``kfp-finetune``: compile, run locally, validate data, check a cluster, and upload/run/schedule on a KFP server.

Exit codes: 0 success, 1 the work failed (e.g. invalid data, a failed run), 2 bad usage or bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pipelines.training.finetuning import PIPELINES
from pipelines.training.finetuning.settings import STEPS

#: The pipeline ``kfp-finetune doctor`` checks when none is named (the guide's quick start).
DOCTOR_DEFAULT_PIPELINE = "osft-minimal"
SECRET_FLAGS = {
    "kubernetes-credentials-secret": "KUBERNETES_SERVER_URL / KUBERNETES_AUTH_TOKEN",
    "s3-secret": "the data connection's AWS_* keys",
    "hf-token-secret": "HF_TOKEN",
    "oci-pull-secret": "OCI_PULL_SECRET_MODEL_DOWNLOAD or .dockerconfigjson (config.json) for oci:// models",
}
#: The option tables: ``{flag: help}`` (a string option), or ``{flag: add_argument's keywords}``.
Options = dict[str, "str | dict[str, Any]"]
COMPILE_SETTINGS: Options = {
    "--pvc-size": "workspace PVC size, e.g. 50Gi",
    "--pvc-storage-class": "workspace PVC storage class ('' = cluster default)",
    "--pvc-access-modes": "comma-separated, e.g. ReadWriteMany",
    "--pipeline-name": "name of the compiled pipeline",
    "--image": "image of every step, built from the Containerfile (e.g. your ImageStream: image-registry.openshift-"
    "image-registry.svc:5000/<namespace>/kfp-finetune:latest); default: the project's published step image",
    "--eval-image": "image of the evaluation step (a Containerfile build with CUDA torch when it requests GPUs); "
    "default: --image if given, else the published CUDA step image (the CPU one with --eval-gpus 0)",
    **{
        f"--{step}-{kind}": {"metavar": "QUANTITY", "help": argparse.SUPPRESS}
        for step in STEPS
        for kind in ("cpu-request", "cpu-limit", "memory-request", "memory-limit")
    },
    "--eval-gpus": {"type": int, "help": "accelerators of the evaluation step (default 1; 0 = CPU only)"},
    "--eval-gpu-resource": "extended resource of the evaluation step (default nvidia.com/gpu)",
    "--eval-node-selector": "key=value node selector of the evaluation step (default nvidia.com/gpu.present=true)",
    **{f"--{flag}": f"name of the (optional) secret with {meaning}" for flag, meaning in SECRET_FLAGS.items()},
}
COMPILE_SETTINGS_GROUP = (
    "compile-time settings (default: KFP_FINETUNE_<NAME> env vars, then the pipeline.py constants); also "
    "--<step>-cpu-request/-cpu-limit/-memory-request/-memory-limit QUANTITY for step dataset|launcher|eval|registry"
)
IMAGE_CHECK_GROUP = "image check (the registries' manifest endpoints; unreachable = a warning)"
PULL_SECRET_FILE: Options = {
    "--pull-secret-file": "Docker config.json (or podman auth.json) with credentials for private registries"
}
IMAGE_CHECK: Options = {
    "--no-image-check": {
        "action": "store_true",
        "help": "do not ask the registries whether the pipeline's images exist (also: KFP_FINETUNE_NO_IMAGE_CHECK=1)",
    },
    **PULL_SECRET_FILE,
}
CONNECTION: Options = {
    "--host": "KFP API URL (default: KFP_HOST)",
    "--token-file": "file holding a bearer token, e.g. from `oc whoami -t` (default: the KFP_TOKEN env var)",
    "--namespace": "namespace (multi-user KFP)",
    "--ca-bundle": "CA bundle to verify the server's certificate",
    "--insecure-skip-tls-verify": {"action": "store_true", "help": "do not verify TLS (not recommended)"},
    "--request-timeout": {"type": float, "default": 60.0, "help": "seconds one API request may wait (default: 60)"},
}
PARAMETER_VALUES: Options = {
    "--param": {
        "action": "append",
        "default": [],
        "help": "NAME=VALUE, a pipeline argument (VALUE: JSON if it parses)",
    },
    "--params-file": "YAML or JSON file of pipeline arguments",
}
DEMO: Options = {
    "--algorithm": {"choices": ("sft", "osft", "lora", "grpo", "lora_grpo"), "default": "sft"},
    "--output-dir": {"type": Path, "default": Path("kfp-finetune-demo")},
    "--dataset-uri": "training data: a path, s3://, http(s):// or a Hub id such as LipengCS/Table-GPT:All (default: "
    "the shipped demo dataset)",
    "--offline": {"action": "store_true", "help": "never reach the Hugging Face Hub (a Hub dataset must be cached)"},
    "--registry-address": "register the model there (default: skipped)",
    "--modelcar-uri": "publish the model as an OCI modelcar there, e.g. oci://localhost:5000/demo/tiny:1",
    "--modelcar-base-image": "the image the modelcar is layered on (registry/repo:tag)",
    "-v --verbose": {"action": "store_true", "help": "show every line the steps print (always in OUTPUT_DIR/demo.log)"},
}
DOCTOR: Options = {
    "--namespace": "the Data Science Project (default: the kubeconfig context's)",
    **PARAMETER_VALUES,
    "--json": {"action": "store_true", "help": "print the report as JSON"},
    "--kfp-host": "KFP API URL to health-check (default: KFP_HOST; unset: skipped)",
    "--token-file": "file with the KFP bearer token (default: KFP_TOKEN)",
    "--ca-bundle": "CA bundle for the KFP API and Model Registry certificates",
}
IMAGES: Options = {
    "--format": {"choices": ("imageset", "list"), "default": "imageset", "help": "imageset (default) or list"},
    "--resolve-digests": {"action": "store_true", "help": "ask each registry for the image's digest and pin it"},
    "--no-runtimes": {"action": "store_true", "help": "leave out the Trainer runtimes' images"},
    **PULL_SECRET_FILE,
}
PIPELINE: Options = {"pipeline": {"help": "a pipeline name (e.g. osft-minimal) or a compiled YAML file"}}
#: Each command: its help, its description, its own options.
COMMAND_TABLE: dict[str, tuple[str, str, Options]] = {
    "compile": (
        "compile pipelines to YAML",
        "Compiles pipelines to KFP YAML for the RHOAI dashboard's Import pipeline, with the compile-time settings "
        "(PVC, images, resources, secrets' names) from the pipeline.py constants, KFP_FINETUNE_* variables and these "
        "flags, in that order.",
        {
            "names": {"nargs": "*", "metavar": "PIPELINE", "help": f"one or more of: {', '.join(PIPELINES)}"},
            "--all": {"action": "store_true", "help": "compile every pipeline"},
            "-o --output": {
                "type": Path,
                "help": "output file (one pipeline) or directory (several); default: "
                "pipeline.yaml beside each pipeline module",
            },
        },
    ),
    "images": (
        "list every image the pipelines and their training runtimes use (an oc-mirror ImageSetConfiguration)",
        "Compiles the pipelines (all six, or those named; or reads compiled YAMLs) and prints every image they and the "
        "Trainer runtimes they target use, for mirroring into a disconnected cluster.",
        {"pipelines": {"nargs": "*", "metavar": "PIPELINE", "help": "pipeline names or compiled YAML files"}, **IMAGES},
    ),
    "demo": (
        "run a whole pipeline locally on a tiny model (kfp.local, CPU)",
        "Runs the expert pipeline of ALGORITHM through kfp.local on a tiny model built here: download and validate the "
        "data, evaluate the base model, train on CPU, evaluate the fine-tuned model against it, register (only with "
        "--registry-address); then tells what it gained and what it forgot.",
        DEMO,
    ),
    "validate-dataset": (
        "run the dataset step locally (download, validate, split, token statistics); print its report",
        "Runs the pipelines' dataset step on this machine: downloads URI, converts it to the chat format, checks "
        "every row, splits it, and prints the report; exit 1 when the rows fail the rules.",
        {
            "uri": {"help": "dataset URI (HF id, s3://, http(s)://, pvc:// or a local path)"},
            "--output-dir": {"type": Path, "default": None, "help": "keep the train/eval split there"},
        },
    ),
    "doctor": (
        "check a cluster and namespace before a run: print what is missing and how to fix it",
        "Checks the training launcher, permissions, storage, secrets, GPUs and endpoints one run of PIPELINE needs; "
        "one line per check, 'OK | WARN | FAIL  <what>  — <remedy>'. Exit 0 when nothing FAILs.",
        {"pipeline": {"nargs": "?", "default": DOCTOR_DEFAULT_PIPELINE, "help": "a pipeline name or a YAML"}, **DOCTOR},
    ),
    "upload": (
        "upload a pipeline to a KFP server",
        "Compiles PIPELINE (or takes a compiled YAML) and uploads it to the KFP API at --host, as a new pipeline or a "
        "new version of it.",
        {
            **PIPELINE,
            "--name": "pipeline name on the server (default: PIPELINE)",
            "--version": "version name (default: a timestamp)",
            "--description": "",
        },
    ),
    "run": (
        "start a run",
        "Checks the arguments against the pipeline and its components' rules, then starts one run of PIPELINE on the "
        "KFP API at --host.",
        {**PIPELINE, **PARAMETER_VALUES, "--experiment": {"default": "Default"}, "--run-name": "run name"},
    ),
    "schedule": (
        "create a recurring run",
        "Checks the arguments as run does, then creates a recurring run of PIPELINE (--cron or --interval) on the KFP "
        "API at --host.",
        {
            **PIPELINE,
            **PARAMETER_VALUES,
            "--experiment": {"default": "Default"},
            "--name": "recurring run name (default: PIPELINE)",
            "--max-concurrency": {"type": int, "default": 1},
        },
    ),
}
KFP_COMMANDS = ("upload", "run", "schedule")


def _add(parser: Any, options: Options, default: str | None = "") -> None:
    """Adds each option of a table above; a string option defaults to ``default``."""
    for flag, settings in options.items():
        keywords = {"default": default, "help": settings} if isinstance(settings, str) else settings
        parser.add_argument(*flag.split(), **keywords)


def dataset_step_defaults() -> dict[str, object]:
    """The dataset component's literal parameter defaults, read from its ``component.py`` source without importing it.

    Importing the component takes seconds; ``validate-dataset`` must start fast (``benchmarks/validate_dataset.py``).
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
        except ValueError:  # a non-literal default: not a CLI option
            continue
    return {name: value for name, value in defaults.items() if isinstance(value, (bool, int, float, str))}


def build_parser(dataset_options: bool = True) -> argparse.ArgumentParser:
    """The ``kfp-finetune`` argument parser.

    Args:
        dataset_options: Add ``validate-dataset``'s options (read from the dataset component, which takes an import).
    """
    parser = argparse.ArgumentParser(prog="kfp-finetune", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for name, (help_text, description, options) in COMMAND_TABLE.items():
        command = sub.add_parser(name, help=help_text, description=description)
        _add(command, options)
        if name in KFP_COMMANDS:
            _add(command.add_argument_group("KFP server"), CONNECTION)
        if name not in ("demo", "validate-dataset"):
            _add(command.add_argument_group(COMPILE_SETTINGS_GROUP), COMPILE_SETTINGS, default=None)
        if name not in ("demo", "validate-dataset", "images"):
            _add(command.add_argument_group(IMAGE_CHECK_GROUP), IMAGE_CHECK)
    if dataset_options:  # one flag per option of the dataset step, with the component's defaults and descriptions
        from components.data_processing.dataset_download.parameter_docs import PARAMETER_DOCS

        group = sub.choices["validate-dataset"].add_argument_group(
            "dataset step options (as in the pipelines' phase 01 parameters)"
        )
        for name, default in dataset_step_defaults().items():
            help_text = f"{' '.join(PARAMETER_DOCS.get(name, '').split())} (default: {default!r})".lstrip()
            kind = {"action": "store_true"} if isinstance(default, bool) else {"type": type(default)}
            group.add_argument(f"--{name.replace('_', '-')}", dest=name, default=default, help=help_text, **kind)
    when = sub.choices["schedule"].add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", default="", help="6-field cron with seconds, e.g. '0 0 2 * * *'")
    when.add_argument("--interval", type=int, default=None, metavar="SECONDS", help="run every N seconds")
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
