"""Generates the reference part of every component and pipeline README.

* A component's ``README.md`` gets a block between ``<!-- generated:start -->`` and ``<!-- generated:end -->``
  built from its ``metadata.yaml`` (name, description, stability, dependencies) and its function's signature and
  Google docstring (parameters with types, defaults and descriptions; outputs; a usage snippet). The rest of the
  README (overview details, failure modes) is hand-written and kept.
* ``pipelines/training/finetuning/README.md`` is generated whole from the six ``@dsl.pipeline`` functions (their
  signatures and docstrings, read with ``inspect`` as KFP reads them): one table per pipeline; so is each pipeline
  folder's ``README.md`` (``pipelines/training/<name>/README.md``, with the ``## Inputs 📥`` section the RHOAI guide
  links to as ``#inputs-``).

Usage: ``python scripts/generate_readme.py`` writes; ``--check`` only reports stale files (exit code 1).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

START, END = "<!-- generated:start -->", "<!-- generated:end -->"
COMPONENTS = {
    "components/data_processing/dataset_download": "dataset_download",
    "components/training/finetuning": "train_model",
    "components/evaluation/lm_eval": "lm_eval",
    "components/deployment/kubeflow_model_registry": "model_registry",
}
PIPELINES_README = REPO_ROOT / "pipelines/training/finetuning/README.md"


def _type_name(annotation: Any) -> str:
    """A readable name of a KFP parameter annotation (``Output[Model]``, ``list``, ``str``...)."""
    if annotation is inspect.Parameter.empty:
        return ""
    text = getattr(annotation, "__name__", None) or str(annotation)
    text = str(annotation) if "[" in str(annotation) else text
    for prefix in ("typing.", "kfp.dsl.types.artifact_types.", "kfp.dsl.types.type_annotations.", "kfp.dsl.", "dsl."):
        text = text.replace(prefix, "")
    return text.replace("typing_extensions.Annotated", "Annotated")


def _is_output(annotation: Any) -> bool:
    return "Output" in str(annotation) or "OutputPath" in str(annotation)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def _default(parameter: inspect.Parameter) -> str:
    return "*required*" if parameter.default is inspect.Parameter.empty else f"`{parameter.default!r}`"


def component_block(directory: str, public_name: str) -> str:
    """The generated README block of one component."""
    import docstring_parser

    package = importlib.import_module(directory.replace("/", "."))
    func = getattr(package, public_name).python_func
    metadata = yaml.safe_load((REPO_ROOT / directory / "metadata.yaml").read_text())
    docs = {p.arg_name: p.description for p in docstring_parser.parse(inspect.getdoc(func) or "").params}
    signature = inspect.signature(func)
    inputs = [p for p in signature.parameters.values() if not _is_output(p.annotation) and p.name != "task_config"]
    outputs = [p for p in signature.parameters.values() if _is_output(p.annotation)]
    python = ", ".join(f"`{d['name']}=={d['version']}`" for d in metadata["dependencies"]["python"])
    services = ", ".join(f"{d['name']} {d['version']}" for d in metadata["dependencies"].get("services", []))
    lines = [
        START,
        f"# `{public_name}`",
        "",
        metadata["description"].strip(),
        "",
        f"Stability: **{metadata['stability']}** · last verified {metadata['lastVerified']} · "
        f"tags: {', '.join(metadata['tags'])}",
        "",
        f"Python packages: {python}" + (f" · platform: {services}" if services else ""),
        "",
        "## Parameters",
        "",
        "| name | type | default | description |",
        "|---|---|---|---|",
        *[
            f"| `{p.name}` | `{_cell(_type_name(p.annotation))}` | "
            f"{_cell(_default(p))} | {_cell(docs.get(p.name, ''))} |"
            for p in inputs
        ],
        "",
        "## Outputs",
        "",
        "| name | type | description |",
        "|---|---|---|",
        *[f"| `{p.name}` | `{_cell(_type_name(p.annotation))}` | {_cell(docs.get(p.name, ''))} |" for p in outputs],
    ]
    if signature.return_annotation not in (inspect.Signature.empty, None):
        lines.append(f"| (return) | `{_cell(_type_name(signature.return_annotation))}` | |")
    required = [p.name for p in inputs if p.default is inspect.Parameter.empty]
    lines += [
        "",
        "## Import",
        "",
        "```python",
        f"from {directory.replace('/', '.')} import {public_name}",
        "",
        f"task = {public_name}({', '.join(f'{name}=...' for name in required)})",
        "```",
        END,
    ]
    return "\n".join(lines) + "\n"


def with_block(readme: str, block: str) -> str:
    """``readme`` with its generated block replaced (or put first when there is none)."""
    if START in readme and END in readme:
        before, rest = readme.split(START, 1)
        after = rest.split(END, 1)[1].lstrip("\n")
        return before + block + ("\n" + after if after else "")
    return block + ("\n" + readme if readme.strip() else "")


def parameter_table(pipeline: Any) -> list[str]:
    """The ``| parameter | type | default | description |`` rows of one pipeline (one source for both READMEs)."""
    from pipelines.training.finetuning.interface import REQUIRED, pipeline_parameters

    lines = ["| parameter | type | default | description |", "|---|---|---|---|"]
    for p in pipeline_parameters(pipeline):
        default = "*required*" if p.default is REQUIRED else f"`{p.default!r}`"
        lines.append(f"| `{p.name}` | `{p.annotation.__name__}` | {default} | {_cell(p.description)} |")
    return lines


def pipeline_directory(name: str) -> Path:
    """The folder of pipeline ``name`` (``pipelines/training/<name>/``, the RHOAI guide's paths)."""
    from pipelines.compile import default_output_path

    return default_output_path(name).parent


def pipeline_readme(name: str) -> str:
    """The generated ``README.md`` of one pipeline folder: what it is, how to run it, its ``## Inputs``."""
    from pipelines.compile import pipeline_function
    from pipelines.training.finetuning.interface import pipeline_description

    pipeline = pipeline_function(name)
    folder = pipeline_directory(name).relative_to(REPO_ROOT)
    lines = [
        f"# `{name}` pipeline",
        "",
        "<!-- Generated by scripts/generate_readme.py from pipeline.py; do not edit. -->",
        "",
        pipeline_description(pipeline),
        "",
        "## Run it",
        "",
        f"Compile with `PYTHONPATH=$(pwd) python {folder}/pipeline.py` (writes `{folder}/pipeline.yaml`; the",
        "compile-time constants `PVC_SIZE`, `PVC_STORAGE_CLASS`, `PVC_ACCESS_MODES`, `PIPELINE_NAME` sit at the top of",
        f"`pipeline.py`, the run-time parameters below are the signature of `{name.replace('-', '_')}_pipeline` there)",
        f"or `kfp-finetune compile {name}`, import the YAML in the RHOAI dashboard (Develop & train →",
        "Pipelines → Import pipeline) and create a run setting the required parameters below; or",
        f"`kfp-finetune doctor {name}` then `kfp-finetune run {name} --param NAME=VALUE ...` (see docs/running.md).",
        "",
        "## Inputs 📥",
        "",
        *parameter_table(pipeline),
    ]
    return "\n".join(lines) + "\n"


def pipelines_readme() -> str:
    """The whole generated ``pipelines/training/finetuning/README.md``."""
    from pipelines.compile import pipeline_function
    from pipelines.training.finetuning import PIPELINES
    from pipelines.training.finetuning.interface import pipeline_description

    lines = [
        "# Fine-tuning pipelines",
        "",
        "<!-- Generated by scripts/generate_readme.py from the pipeline modules; do not edit. -->",
        "",
        "Each `pipelines/training/<name>/pipeline.py` is one explicit `@dsl.pipeline` function wiring",
        "`dataset_download → train_model → lm_eval → model_registry` (plus a second `lm_eval` of the base model,",
        "before training (training waits for its GPU), whose results are the fine-tuned evaluation's baseline), with",
        "its compile-time constants at the top;",
        "`tasks.py` here holds the task set-up they share (secrets, resources, images, GPU evaluation, caching) and",
        "`settings.py` the compile-time settings. `pipeline.yaml` beside each module is its compiled form, generated",
        "(`kfp-finetune compile --all`), not committed. A minimal pipeline passes what it does not list to the",
        "components as their defaults (or as the constants written in its `pipeline.py`). Each pipeline folder has its",
        "own README.",
    ]
    for name in PIPELINES:
        pipeline = pipeline_function(name)
        folder = pipeline_directory(name).relative_to(REPO_ROOT)
        lines += [
            "",
            f"## `{name}`",
            "",
            pipeline_description(pipeline) + f" ([{folder}/README.md](../../../{folder}/README.md))",
            "",
            *parameter_table(pipeline),
        ]
    return "\n".join(lines) + "\n"


def expected_files() -> dict[Path, str]:
    """Every generated README and its expected content."""
    from pipelines.training.finetuning import PIPELINES

    expected = {PIPELINES_README: pipelines_readme()}
    expected.update({pipeline_directory(name) / "README.md": pipeline_readme(name) for name in PIPELINES})
    for directory, public_name in COMPONENTS.items():
        readme = REPO_ROOT / directory / "README.md"
        current = readme.read_text() if readme.exists() else ""
        expected[readme] = with_block(current, component_block(directory, public_name))
    return expected


def main(argv: list[str]) -> int:
    """Writes the READMEs, or with ``--check`` lists the stale ones."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report stale READMEs instead of writing them")
    args = parser.parse_args(argv)
    stale = []
    for path, content in expected_files().items():
        if not path.exists() or path.read_text() != content:
            stale.append(path)
            if not args.check:
                path.write_text(content)
    verb = "stale" if args.check else "written"
    for path in stale:
        print(f"{verb}: {path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
