"""``kfp-finetune``: compile, run locally, validate data, and upload/run/schedule on a KFP (RHOAI) server.

Exit codes: 0 success, 1 the work failed (e.g. invalid data, a failed run), 2 bad usage or bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipelines.training.finetuning import PIPELINES


def _add_compile_settings(parser: argparse.ArgumentParser) -> None:
    """Flags of the compile-time settings (each also readable from ``KFP_FINETUNE_<NAME>``)."""
    group = parser.add_argument_group("compile-time settings (default: KFP_FINETUNE_<NAME> env vars, then built-ins)")
    group.add_argument("--pvc-size", help="workspace PVC size, e.g. 50Gi")
    group.add_argument("--pvc-storage-class", help="workspace PVC storage class ('' = cluster default)")
    group.add_argument("--pvc-access-modes", help="comma-separated, e.g. ReadWriteMany")
    group.add_argument("--pipeline-name", help="name of the compiled pipeline")
    group.add_argument("--base-image", help="base image of the components (packages installed at run time)")
    group.add_argument(
        "--runtime-image", help="prebuilt runtime image (see Containerfile); nothing installed at run time"
    )
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


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags giving pipeline arguments."""
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a pipeline argument (VALUE parsed as JSON when possible); repeatable",
    )
    parser.add_argument("--params-file", default="", help="YAML or JSON file of pipeline arguments")
    parser.add_argument("--experiment", default="Default", help="experiment name")


def build_parser() -> argparse.ArgumentParser:
    """The ``kfp-finetune`` argument parser."""
    parser = argparse.ArgumentParser(prog="kfp-finetune", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    compile_ = sub.add_parser("compile", help="compile pipelines to YAML")
    compile_.add_argument("names", nargs="*", metavar="PIPELINE", help=f"one or more of: {', '.join(PIPELINES)}")
    compile_.add_argument("--all", action="store_true", help="compile all six pipelines")
    compile_.add_argument(
        "-o",
        "--output",
        type=Path,
        help="output file (one pipeline) or directory (several); default: pipeline.yaml beside each pipeline module",
    )
    _add_compile_settings(compile_)

    demo = sub.add_parser("demo", help="run a whole pipeline locally on a tiny model (kfp.local, CPU)")
    demo.add_argument("--algorithm", choices=("sft", "osft", "lora"), default="sft")
    demo.add_argument("--output-dir", type=Path, default=Path("kfp-finetune-demo"))
    demo.add_argument("--dataset-uri", default="", help="training data (default: the shipped demo dataset)")
    demo.add_argument("--registry-address", default="", help="register the model there (default: skipped)")

    validate = sub.add_parser("validate-dataset", help="download and validate a dataset locally; print the report")
    validate.add_argument("uri", help="dataset URI (HF id, s3://, http(s)://, pvc:// or a local path)")
    validate.add_argument("--input-format", default="auto")
    validate.add_argument("--on-invalid", choices=("fail", "drop"), default="fail")
    validate.add_argument("--allow-trailing-user", action="store_true")

    for name, help_text in (
        ("upload", "upload a pipeline to a KFP server"),
        ("run", "start a run"),
        ("schedule", "create a recurring run"),
    ):
        command = sub.add_parser(name, help=help_text)
        command.add_argument("pipeline", help="a pipeline name (e.g. osft-minimal) or a compiled YAML file")
        _add_connection(command)
        _add_compile_settings(command)
        if name == "upload":
            command.add_argument("--name", default="", help="pipeline name on the server (default: PIPELINE)")
            command.add_argument("--version", default="", help="version name (default: a timestamp)")
            command.add_argument("--description", default="")
        else:
            _add_arguments(command)
            command.add_argument(
                "--run-name" if name == "run" else "--name",
                default="",
                help="run name" if name == "run" else "recurring run name (default: PIPELINE)",
            )
        if name == "schedule":
            when = command.add_mutually_exclusive_group(required=True)
            when.add_argument("--cron", default="", help="6-field cron with seconds, e.g. '0 0 2 * * *'")
            when.add_argument("--interval", type=int, default=0, metavar="SECONDS", help="run every N seconds")
            command.add_argument("--max-concurrency", type=int, default=1)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs ``kfp-finetune``; returns the exit code."""
    from pipelines.commands import COMMANDS

    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except (ValueError, FileNotFoundError) as error:  # bad input: usage, parameters, files
        print(f"kfp-finetune {args.command}: error: {error}", file=sys.stderr)
        return 2
    except RuntimeError as error:  # the work failed: a server refused, a local run failed
        print(f"kfp-finetune {args.command}: failed: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
