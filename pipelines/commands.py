"""The ``kfp-finetune`` sub-commands; each takes the parsed arguments and returns an exit code."""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipelines.training.finetuning import PIPELINES


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """The compile-time settings given as flags (they win over env and constants); exports the image settings."""
    from pipelines.compile import set_image_settings

    set_image_settings(base_image=args.base_image, runtime_image=args.runtime_image)
    modes = args.pvc_access_modes
    return dict(
        pvc_size=args.pvc_size,
        pvc_storage_class=args.pvc_storage_class,
        pvc_access_modes=None if modes is None else tuple(m.strip() for m in modes.split(",") if m.strip()),
        pipeline_name=args.pipeline_name,
        kubernetes_credentials_secret=args.kubernetes_credentials_secret,
        s3_secret=args.s3_secret,
        hf_token_secret=args.hf_token_secret,
        oci_pull_secret=args.oci_pull_secret,
        eval_gpus=args.eval_gpus,
        eval_gpu_resource=args.eval_gpu_resource,
        eval_node_selector=args.eval_node_selector,
    )


def compile_command(args: argparse.Namespace) -> int:
    """``kfp-finetune compile``."""
    from pipelines.compile import checked_in_path, compile_named

    names = list(PIPELINES) if args.all else args.names
    if not names:
        raise ValueError("name a pipeline or pass --all")
    settings = _settings(args)
    for index, name in enumerate(names, 1):
        if args.output is None:
            target = checked_in_path(name) if name in PIPELINES else Path(f"{name}.yaml")
        elif len(names) == 1 and args.output.suffix in (".yaml", ".yml"):
            target = args.output
        else:
            target = args.output / f"{name}.yaml"
        print(f"[{index}/{len(names)}] {name} -> {compile_named(name, target, settings)}", file=sys.stderr)
    return 0


def demo_command(args: argparse.Namespace) -> int:
    """``kfp-finetune demo``."""
    from pipelines.demo.run_demo import run_demo

    run_demo(args.output_dir, args.algorithm, args.dataset_uri, args.registry_address)
    return 0


def validate_dataset_command(args: argparse.Namespace) -> int:
    """``kfp-finetune validate-dataset``: exit 0 when every row is usable, 1 otherwise."""
    from components.data_processing.dataset_download.validate import validate_dataset_uri

    report = validate_dataset_uri(
        args.uri,
        input_format=args.input_format,
        on_invalid=args.on_invalid,
        allow_trailing_user=args.allow_trailing_user,
    )
    print(report.to_markdown())
    return 0 if report.passed else 1


def _package(args: argparse.Namespace, workdir: str) -> str:
    """A compiled pipeline file: the given YAML, or the named pipeline compiled with the flags' settings."""
    from pipelines.compile import compile_named

    if args.pipeline in PIPELINES:
        return str(compile_named(args.pipeline, Path(workdir) / f"{args.pipeline}.yaml", _settings(args)))
    if not Path(args.pipeline).is_file():
        raise FileNotFoundError(
            f"PIPELINE {args.pipeline!r} is neither a pipeline name ({', '.join(PIPELINES)}) nor a compiled YAML file"
        )
    return args.pipeline


def _connection(args: argparse.Namespace):
    from pipelines import kfp_api

    return kfp_api.connection_from_options(
        host=args.host,
        token_file=args.token_file,
        insecure_skip_tls_verify=args.insecure_skip_tls_verify,
        ca_bundle=args.ca_bundle,
        namespace=args.namespace,
    )


def _default_name(args: argparse.Namespace) -> str:
    return args.pipeline if args.pipeline in PIPELINES else Path(args.pipeline).stem


def _submit(args: argparse.Namespace, call: Callable[..., dict], with_arguments: bool, **options: Any) -> dict:
    """Compiles or reads the package, then calls ``call(connection, package, [arguments,] **options)``."""
    from pipelines import kfp_api

    leading = [kfp_api.load_arguments(args.param, args.params_file)] if with_arguments else []
    with tempfile.TemporaryDirectory() as workdir:
        return call(_connection(args), _package(args, workdir), *leading, **options)


def upload_command(args: argparse.Namespace) -> int:
    """``kfp-finetune upload``."""
    from pipelines import kfp_api

    result = _submit(
        args,
        kfp_api.upload_pipeline,
        False,
        pipeline_name=args.name or _default_name(args),
        description=args.description,
        version_name=args.version,
    )
    print(f"uploaded: pipeline_id={result['pipeline_id']} version_id={result['version_id']}")
    return 0


def run_command(args: argparse.Namespace) -> int:
    """``kfp-finetune run``."""
    from pipelines import kfp_api

    result = _submit(args, kfp_api.create_run, True, run_name=args.run_name, experiment_name=args.experiment)
    print(f"run started: run_id={result['run_id']} experiment_id={result['experiment_id']}")
    return 0


def schedule_command(args: argparse.Namespace) -> int:
    """``kfp-finetune schedule``."""
    from pipelines import kfp_api

    result = _submit(
        args,
        kfp_api.schedule_run,
        True,
        job_name=args.name or _default_name(args),
        experiment_name=args.experiment,
        cron=args.cron,
        interval_seconds=args.interval,
        max_concurrency=args.max_concurrency,
    )
    print(f"scheduled: recurring_run_id={result['recurring_run_id']} experiment_id={result['experiment_id']}")
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "compile": compile_command,
    "demo": demo_command,
    "validate-dataset": validate_dataset_command,
    "upload": upload_command,
    "run": run_command,
    "schedule": schedule_command,
}
