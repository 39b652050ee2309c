"""The ``kfp-finetune`` sub-commands; each takes the parsed arguments and returns an exit code."""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pipelines.training.finetuning import PIPELINES

YAML_SUFFIXES = (".yaml", ".yml")
#: The extra each command needs beyond the core install (the others need none for their common use).
COMMAND_EXTRAS = {"demo": "demo", "validate-dataset": "steps", "doctor": "steps"}
#: What ``demo`` runs the steps with: checked before it starts anything.
DEMO_PACKAGES = ("torch", "transformers", "peft", "datasets", "lm_eval", "docker")
_CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """The compile-time settings given as flags (they win over env and constants); ``None`` = not given."""
    import dataclasses

    from pipelines.training.finetuning.settings import CompileSettings

    return {field.name: getattr(args, field.name, None) for field in dataclasses.fields(CompileSettings)}


def check_output_option(output: Path | None, names: list[str], all_pipelines: bool) -> None:
    """``-o``: a ``.yaml`` file for one pipeline, a directory for several; a :class:`ValueError` otherwise."""
    if output is None or (len(names) < 2 and not all_pipelines):
        return
    what = "--all" if all_pipelines else f"{len(names)} pipelines"
    if output.suffix in YAML_SUFFIXES:
        raise ValueError(
            f"-o {str(output)!r} names a YAML file, but {what} compile to one file each: with several pipelines "
            "-o must be a directory (it receives <pipeline>.yaml per pipeline)"
        )
    if output.exists() and not output.is_dir():
        raise ValueError(f"-o {str(output)!r} is a file, but {what} need a directory: name a directory")


def compile_command(args: argparse.Namespace) -> int:
    """``kfp-finetune compile``: exit 1 when a step's image cannot be pulled (the YAML is written either way)."""
    from pipelines.compile import compile_named, default_output_path

    names = list(PIPELINES) if args.all else args.names
    if not names:
        raise ValueError("name a pipeline or pass --all")
    check_output_option(args.output, names, args.all)
    compiled = []
    for index, name in enumerate(names, 1):
        if args.output is None:
            target = default_output_path(name) if name in PIPELINES else Path(f"{name}.yaml")
        elif len(names) == 1 and args.output.suffix in YAML_SUFFIXES:
            target = args.output
        else:
            target = args.output / f"{name}.yaml"
        compiled.append(compile_named(name, target, _settings(args)))
        print(f"[{index}/{len(names)}] {name} -> {compiled[-1]}", file=sys.stderr)
    return 0 if pipeline_images_pullable(compiled, args) else 1


def docker_config_of(args: argparse.Namespace) -> dict | None:
    """The ``--pull-secret-file`` Docker config.json / podman auth.json, or ``None``; errors never quote its content."""
    import json

    from pipelines.kfp_api.arguments import read_option_file

    given = getattr(args, "pull_secret_file", "")
    if not given:
        return None
    path = str(Path(given).expanduser())
    try:
        config = json.loads(read_option_file(path, "the pull secret file", "--pull-secret-file"))
    except json.JSONDecodeError as error:
        raise ValueError(f"--pull-secret-file {path!r}: not JSON (line {error.lineno}); give a config.json") from None
    if not isinstance(config, dict):
        raise ValueError(f"--pull-secret-file {path!r}: not a Docker config.json (a JSON object with 'auths')")
    return config


def pipeline_images_pullable(packages: list[Path], args: argparse.Namespace) -> bool:
    """Checks every step image of the compiled ``packages`` (one line per problem); False when one is missing."""
    from pipelines.images.pipeline_images import distinct, step_images
    from pipelines.images.pull_check import check_disabled, check_images, report_findings
    from pipelines.kfp_api.arguments import read_pipeline_documents

    if check_disabled(getattr(args, "no_image_check", False)):
        return True
    specs = [(read_pipeline_documents(str(path))[0], Path(path).stem) for path in packages]
    images = distinct(item for spec, label in specs for item in step_images(spec, label))
    return not report_findings(check_images(images, docker_config_of(args)), args.command, sys.stderr)


def images_command(args: argparse.Namespace) -> int:
    """``kfp-finetune images``: every image of the pipelines (and runtimes), as a list or an ImageSetConfiguration."""
    from pipelines.images import pipeline_images as found
    from pipelines.images.pull_check import check_images

    with tempfile.TemporaryDirectory(prefix="kfp-finetune-images-") as workdir:
        files = [_package(args, workdir, name) for name in args.pipelines or list(PIPELINES)]
        named = found.images_of_files([Path(file) for file in files])
    images = found.distinct(named if args.no_runtimes else named + found.runtime_images())
    digests = {}
    if args.resolve_digests:
        for finding in check_images(images, docker_config_of(args)):
            if finding.digest:
                digests[finding.images[0]] = finding.digest
            elif finding.line:
                print(f"kfp-finetune images: warning: {finding.line}", file=sys.stderr)
    if args.format == "list":
        for image in images:
            print(found.pinned(image, digests.get(image, "")))
    else:
        sys.stdout.write(found.image_set_configuration(images, digests))
    return 0


def missing_extra_message(command: str, module: str) -> str:
    """One line: the command, the package the core install lacks, and the extra to install."""
    extra = COMMAND_EXTRAS.get(command, "steps")
    torch = " (torch==2.13.0 from the CPU wheel index first, see README)" if extra in ("demo", "local") else ""
    return (
        f"kfp-finetune {command}: needs the Python package {module!r}, which the core install does not carry: "
        f"pip install 'kfp-finetune[{extra}]'{torch}"
    )


def demo_command(args: argparse.Namespace) -> int:
    """``kfp-finetune demo``."""
    import importlib.util

    missing = next((name for name in DEMO_PACKAGES if importlib.util.find_spec(name) is None), None)
    if missing is not None:
        raise ModuleNotFoundError(missing_extra_message("demo", missing), name=missing)
    from pipelines.demo.run_demo import run_demo

    run_demo(
        args.output_dir,
        args.algorithm,
        args.dataset_uri,
        args.registry_address,
        verbose=args.verbose,
        modelcar_uri=args.modelcar_uri,
        modelcar_base_image=args.modelcar_base_image,
        offline=args.offline,
    )
    return 0


def validate_dataset_command(args: argparse.Namespace) -> int:
    """``kfp-finetune validate-dataset``: the dataset step, locally; exit 0 when it passes, 1 when the rows fail it."""
    from components.data_processing.dataset_download.request import OUTPUTS, dataset_download_request
    from components.data_processing.dataset_download.run import run_dataset_download
    from components.data_processing.dataset_download.validation_report import DatasetValidationError

    names = [name for name in vars(args) if name not in ("command", "uri", "output_dir")]  # the step's options
    arguments = {name: getattr(args, name) for name in names} | dict.fromkeys(OUTPUTS)
    request = dataset_download_request({**arguments, "dataset_uri": args.uri})
    with tempfile.TemporaryDirectory(prefix="kfp-finetune-validate-") as scratch:
        output_dir = args.output_dir or Path(scratch)
        try:
            prepared = run_dataset_download(request, output_dir / "train.jsonl", output_dir / "eval.jsonl")
        except DatasetValidationError as error:
            if error.report is None:
                raise
            print(_for_terminal(error.report.to_markdown(), names))
            return 1
    print(_for_terminal(prepared.to_markdown(), names))
    if args.output_dir:
        print(f"split written to {args.output_dir / 'train.jsonl'} and {args.output_dir / 'eval.jsonl'}")
    return 0


def _for_terminal(report: str, options: list[str]) -> str:
    """The report with its ``Result:`` hint naming flags (``--on-invalid drop``) and control characters escaped."""
    names = "|".join(sorted(map(re.escape, options), key=len, reverse=True))
    pattern = re.compile(rf"\b({names})\b(?:=('[^']*'|[^\s,;)]+))?")

    def flag(match: re.Match[str]) -> str:
        value = (match[2] or "").strip("'")
        return f"--{match[1].replace('_', '-')}" + (f" {value}" if value else "")

    lines = [
        pattern.sub(flag, line) if line.startswith("- Result:") and names else line for line in report.splitlines()
    ]
    text = "\n".join(lines) + ("\n" if report.endswith("\n") else "")
    return _CONTROL_CHARACTERS.sub(lambda m: f"\\x{ord(m[0]):02x}", text)


def _package(args: argparse.Namespace, workdir: str, pipeline: str = "") -> str:
    """A compiled pipeline file: the given YAML, or the named pipeline compiled with the flags' settings."""
    from pipelines.compile import compile_named

    pipeline = pipeline or args.pipeline
    if pipeline in PIPELINES:
        return str(compile_named(pipeline, Path(workdir) / f"{pipeline}.yaml", _settings(args)))
    if not Path(pipeline).is_file():
        raise FileNotFoundError(
            f"PIPELINE {pipeline!r} is neither a pipeline name ({', '.join(PIPELINES)}) nor a compiled YAML file"
        )
    return pipeline


def kfp_api_command(args: argparse.Namespace) -> int:
    """``kfp-finetune upload|run|schedule``: the cheap checks (arguments, connection, cron), compile, then the API."""
    from pipelines import kfp_api
    from pipelines.kfp_api.arguments import check_component_rules

    name = args.pipeline if args.pipeline in PIPELINES else Path(args.pipeline).stem
    if args.command == "upload":
        call, arguments, done, ids = kfp_api.upload_pipeline, [], "uploaded", ("pipeline_id", "version_id")
        options = {"pipeline_name": args.name or name, "description": args.description, "version_name": args.version}
    else:
        arguments = [kfp_api.load_arguments(args.param, args.params_file)]
        options = {"experiment_name": args.experiment}
        if args.command == "run":
            call, done, ids = kfp_api.create_run, "run started", ("run_id", "experiment_id")
            options["run_name"] = args.run_name
        else:
            call, done, ids = kfp_api.schedule_run, "scheduled", ("recurring_run_id", "experiment_id")
            cron = kfp_api.validate_cron(args.cron) if args.cron else args.cron
            options.update(job_name=args.name or name, cron=cron, interval_seconds=args.interval)
            options["max_concurrency"] = args.max_concurrency
    connection = kfp_api.connection_from_options(
        host=args.host,
        token_file=args.token_file,
        insecure_skip_tls_verify=args.insecure_skip_tls_verify,
        ca_bundle=args.ca_bundle,
        namespace=args.namespace,
        timeout_seconds=args.request_timeout,
    )
    with tempfile.TemporaryDirectory(prefix="kfp-finetune-") as workdir:
        package = _package(args, workdir)
        if not pipeline_images_pullable([Path(package)], args):
            print(f"kfp-finetune {args.command}: nothing sent: a step's image cannot be pulled", file=sys.stderr)
            return 1
        if arguments:  # checked here to name the pipeline as given, not the temporary package
            spec = kfp_api.read_pipeline_documents(package)[0]
            kfp_api.check_arguments(spec, arguments[0], args.pipeline)
            check_component_rules(spec, arguments[0], args.pipeline)
        result = call(connection, package, *arguments, **options)
    print(f"{done}: " + " ".join(f"{key}={result[key]}" for key in ids))
    return 0


def doctor_command(args: argparse.Namespace) -> int:
    """``kfp-finetune doctor``: exit 0 when no check fails, 1 otherwise."""
    from pipelines import kfp_api
    from pipelines.doctor.runner import run_doctor
    from pipelines.images.pull_check import check_disabled

    arguments = kfp_api.load_arguments(args.param, args.params_file)
    with tempfile.TemporaryDirectory() as workdir:
        report = run_doctor(
            _package(args, workdir),
            arguments,
            namespace=args.namespace,
            kfp_host=args.kfp_host or os.environ.get(kfp_api.HOST_ENV, ""),
            token_file=args.token_file,
            ca_bundle=args.ca_bundle,
            image_check=not check_disabled(args.no_image_check),
            docker_config=docker_config_of(args),
        )
    print(report.to_json() if args.json else report.text())
    return report.exit_code


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "compile": compile_command,
    "images": images_command,
    "demo": demo_command,
    "validate-dataset": validate_dataset_command,
    "doctor": doctor_command,
    "upload": kfp_api_command,
    "run": kfp_api_command,
    "schedule": kfp_api_command,
}
