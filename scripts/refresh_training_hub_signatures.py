"""Snapshots the keyword arguments Training Hub 0.11.x accepts, from the real wheels, without importing them.

Training Hub cannot be installed in the test venv (it pulls a CUDA torch and cannot train on CPU), so the test of
``components/training/finetuning/pod/entrypoint.py`` checks its keyword arguments against this snapshot instead:

* the parameters of ``training_hub.sft``, ``osft`` and ``lora_sft`` (``ast`` of the wheel's source);
* where each function's ``**kwargs`` end up: ``instructlab-training``'s ``TrainingArgs`` fields (SFT),
  ``mini-trainer``'s ``TrainingArgs`` fields (OSFT), and for LoRA the parameters of ``LoRASFTAlgorithm.train`` plus
  the ``params.get("...")`` keys its Unsloth backend reads.

Usage: ``python scripts/refresh_training_hub_signatures.py [--wheel-dir DIR] [--version 0.11.2]``; without
``--wheel-dir`` the three wheels are fetched with ``pip download --no-deps`` into a temporary directory.
"""

import argparse
import ast
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

SNAPSHOT = Path(__file__).resolve().parents[1] / "components/training/finetuning/training_hub_signatures.json"
PACKAGES = {
    "training-hub": "training_hub-",
    "instructlab-training": "instructlab_training-",
    "rhai-innovation-mini-trainer": "rhai_innovation_mini_trainer-",
}


def _wheel(directory: Path, prefix: str) -> Path:
    wheels = sorted(directory.glob(f"{prefix}*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"expected one {prefix}*.whl in {directory}, found {[w.name for w in wheels]}")
    return wheels[0]


def _source(wheel: Path, member: str) -> ast.Module:
    with zipfile.ZipFile(wheel) as archive:
        return ast.parse(archive.read(member).decode("utf-8"), filename=f"{wheel.name}!{member}")


def _function(tree: ast.AST, name: str) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise SystemExit(f"function {name} not found")


def _method(tree: ast.Module, class_name: str, name: str) -> ast.FunctionDef:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return _function(node, name)
    raise SystemExit(f"class {class_name} not found")


def _parameters(function: ast.FunctionDef) -> dict:
    arguments = function.args
    names = [a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs if a.arg != "self"]
    return {"parameters": names, "var_keyword": arguments.kwarg is not None}


def _class_fields(tree: ast.Module, class_name: str) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return [s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
    raise SystemExit(f"class {class_name} not found")


_PARAMS_NAMES = {"params", "training_params"}


def _params_keys(tree: ast.Module) -> list[str]:
    """Keys read as ``params.get("k")`` or ``params["k"]`` (also ``training_params``) anywhere in the module."""
    keys = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in _PARAMS_NAMES
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            keys.add(node.args[0].value)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in _PARAMS_NAMES:
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                keys.add(node.slice.value)
    return sorted(keys)


def _describe(wheel: Path) -> dict:
    name, version = wheel.name.split("-")[:2]
    return {"wheel": wheel.name, "version": version, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest()}


def build_snapshot(wheel_dir: Path) -> dict:
    """Parses the three wheels in ``wheel_dir`` into the snapshot dict."""
    hub, ilab, mini = (_wheel(wheel_dir, prefix) for prefix in PACKAGES.values())
    lora_tree = _source(hub, "training_hub/algorithms/lora.py")
    lora_consumed = set(_parameters(_method(lora_tree, "LoRASFTAlgorithm", "train"))["parameters"])
    return {
        "generated_by": "scripts/refresh_training_hub_signatures.py",
        "packages": {
            "training-hub": _describe(hub),
            "instructlab-training": _describe(ilab),
            "rhai-innovation-mini-trainer": _describe(mini),
        },
        "functions": {
            "sft": {
                **_parameters(_function(_source(hub, "training_hub/algorithms/sft.py"), "sft")),
                "kwargs_reach": "instructlab-training TrainingArgs (instructlab/training/config.py)",
                "kwargs_accepted": _class_fields(_source(ilab, "instructlab/training/config.py"), "TrainingArgs"),
            },
            "osft": {
                **_parameters(_function(_source(hub, "training_hub/algorithms/osft.py"), "osft")),
                "kwargs_reach": "mini-trainer TrainingArgs (mini_trainer/training_types.py)",
                "kwargs_accepted": _class_fields(_source(mini, "mini_trainer/training_types.py"), "TrainingArgs"),
            },
            "lora_sft": {
                **_parameters(_function(lora_tree, "lora_sft")),
                "kwargs_reach": "LoRASFTAlgorithm.train parameters + params keys read by the Unsloth backend",
                "kwargs_accepted": sorted(lora_consumed | set(_params_keys(lora_tree))),
            },
        },
    }


def _download(version: str, directory: Path) -> None:
    requirements = [f"training-hub=={version}", "instructlab-training", "rhai-innovation-mini-trainer"]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(directory), *requirements]
    subprocess.run(command, check=True)


def main() -> None:
    """Fetches (or reuses) the wheels, parses them and writes the snapshot atomically."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel-dir", type=Path)
    parser.add_argument("--version", default="0.11.2")
    parser.add_argument("--output", type=Path, default=SNAPSHOT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        wheel_dir = args.wheel_dir or Path(scratch)
        if args.wheel_dir is None:
            _download(args.version, wheel_dir)
        snapshot = build_snapshot(wheel_dir)
    temporary = args.output.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n")
    os.replace(temporary, args.output)
    print(f"wrote {args.output} from {', '.join(p['wheel'] for p in snapshot['packages'].values())}")


if __name__ == "__main__":
    main()
