"""How each component's code reaches its pod, and what importing a component costs (issue 34).

For each component, in a fresh interpreter: the seconds ``from components... import <component>`` takes once kfp
itself is imported (kfp's own import, ~1.5 s here, is measured first in the same process and printed beside it;
target < 0.5 s for the component), and how it is delivered: the size of its one embedded ``execve`` argument
(KFP's tar + gzip + base64 of the real source, guard 96 KiB) or the step image it runs on. For ``train_model`` it
also prints what its code would weigh if it were embedded (the figure that decided its step image), and without the
folders the launcher does not run itself (``pod/``, ``hf_trainer/``, ``local/``).

Usage: ``python benchmarks/component_delivery.py`` from the repository root (not run in CI).
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
COMPONENTS = {
    "dataset_download": "components.data_processing.dataset_download",
    "train_model": "components.training.finetuning",
    "lm_eval": "components.evaluation.lm_eval",
    "model_registry": "components.deployment.kubeflow_model_registry",
}
#: ``train_model``'s folders the launcher itself does not run (the training pods' code, the CPU trainer).
LAUNCHER_ONLY_WITHOUT = ("pod", "hf_trainer", "local")
_PROBE = """
import json, sys, time
started = time.perf_counter()
import kfp
from kfp import dsl, kubernetes
kfp_seconds = time.perf_counter() - started
started = time.perf_counter()
module = __import__(sys.argv[1], fromlist=[sys.argv[2]])
component = getattr(module, sys.argv[2])
seconds = time.perf_counter() - started
command = component.component_spec.implementation.container.command or []
argument = max((len(part.encode()) for part in command), default=0)
print(json.dumps({"kfp": kfp_seconds, "component": seconds, "argument": argument,
                  "image": component.component_spec.implementation.container.image,
                  "embedded": any("__KFP_EMBEDDED_ARCHIVE_B64" in part for part in command)}))
"""


def probe(module: str, name: str) -> dict:
    """Imports one component in a fresh interpreter (default settings: it installs its packages) and measures it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KFP_FINETUNE_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, module, name], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def packed_size(component_dir: Path, without: tuple[str, ...] = ()) -> tuple[int, int, int]:
    """``(files, source bytes, tar+gzip+base64 bytes)`` of a component's code as KFP would embed it.

    ``without``: sub-folders of the component left out (e.g. the training pods' code, which the launcher stages).
    """
    sys.path.insert(0, str(REPO_ROOT))
    from components._common.runtime import stage_runtime_bundle

    with tempfile.TemporaryDirectory() as staging:
        stage_runtime_bundle([component_dir], Path(staging))
        staged = Path(staging) / component_dir.relative_to(REPO_ROOT)
        for folder in without:
            shutil.rmtree(staged / folder)
        files = [p.stat().st_size for p in Path(staging).rglob("*.py")]
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            tar.add(staging, arcname=".")
        packed = base64.b64encode(gzip.compress(buffer.getvalue()))
    return len(files), sum(files), len(packed)


def main() -> None:
    """Prints one row per component."""
    print("| component | import (s) | kfp import (s) | delivery | argument (KiB) |")
    print("|---|---|---|---|---|")
    for name, module in COMPONENTS.items():
        figures = probe(module, name)
        delivery = "embedded (KFP)" if figures["embedded"] else f"image `{figures['image']}`"
        print(
            f"| {name} | {figures['component']:.3f} | {figures['kfp']:.2f} | {delivery} "
            f"| {figures['argument'] / 1024:.1f} |",
            flush=True,
        )
    files, source, packed = packed_size(REPO_ROOT / "components/training/finetuning")
    print(
        f"\ntrain_model's code if embedded: {files} files, {source / 1024:.1f} KiB of source, "
        f"{packed / 1024:.1f} KiB packed (tar + gzip + base64) vs the 96 KiB guard (Linux: 128 KiB per argument)"
    )
    files, source, packed = packed_size(REPO_ROOT / "components/training/finetuning", LAUNCHER_ONLY_WITHOUT)
    print(
        f"without the training pods' code and the CPU trainer ({', '.join(f'{f}/' for f in LAUNCHER_ONLY_WITHOUT)}): "
        f"{files} files, {source / 1024:.1f} KiB of source, {packed / 1024:.1f} KiB packed"
    )


if __name__ == "__main__":
    main()
