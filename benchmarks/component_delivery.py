"""What importing a component costs, and what its compiled container spec holds (issues 34, 43).

For each component, in a fresh interpreter: the seconds ``from components... import <component>`` takes once kfp
itself is imported (kfp's own import, ~1.5 s here, is measured first in the same process and printed beside it;
target < 0.5 s for the component), the image it runs on by default and the size of its compiled container spec
(KFP's executor shim and the wrapper's source: the code itself is in the image; limit 16 KiB).

Usage: ``python benchmarks/component_delivery.py`` from the repository root (not run in CI).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
COMPONENTS = {
    "dataset_download": "components.data_processing.dataset_download",
    "train_model": "components.training.finetuning",
    "lm_eval": "components.evaluation.lm_eval",
    "model_registry": "components.deployment.kubeflow_model_registry",
}
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
container = component.component_spec.implementation.container
spec = {"image": container.image, "command": container.command, "args": container.args}
print(json.dumps({"kfp": kfp_seconds, "component": seconds, "image": container.image,
                  "container_spec": len(json.dumps(spec, separators=(",", ":")).encode())}))
"""


def probe(module: str, name: str) -> dict:
    """Imports one component in a fresh interpreter (default settings) and measures it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KFP_FINETUNE_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, module, name], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    """Prints one row per component."""
    print("| component | import (s) | kfp import (s) | image | container spec (KiB) |")
    print("|---|---|---|---|---|")
    for name, module in COMPONENTS.items():
        figures = probe(module, name)
        print(
            f"| {name} | {figures['component']:.3f} | {figures['kfp']:.2f} | `{figures['image']}` "
            f"| {figures['container_spec'] / 1024:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
