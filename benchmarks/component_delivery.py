"""What importing a component costs, and what its compiled container spec holds (issues 34, 43).

For each component, in a fresh interpreter: the seconds ``from components... import <component>`` takes once kfp
itself is imported (kfp's own import, ~1.5 s here, is measured first in the same process and printed beside it;
target < 0.5 s for the component), the image it runs on by default and the size of its compiled container spec
(KFP's executor shim and the wrapper's source: the code itself is in the image; limit 16 KiB).

Usage: ``python benchmarks/component_delivery.py [--write-figures]`` from the repository root (not run in CI);
``--write-figures`` records the timings and the container spec sizes in ``docs/figures.json``; the sizes, which
depend only on the code, are also re-measured by ``scripts/figures.py`` (:func:`spec_figures`).
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


_SPECS = """
import json, sys
specs = {}
for name, module in json.loads(sys.argv[1]).items():
    container = getattr(__import__(module, fromlist=[name]), name).component_spec.implementation.container
    spec = {"image": container.image, "command": container.command, "args": container.args}
    specs[name] = len(json.dumps(spec, separators=(",", ":")).encode())
print(json.dumps(specs))
"""


def spec_sizes() -> dict[str, int]:
    """Bytes of each component's compiled container spec, default settings, in one fresh interpreter."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KFP_FINETUNE_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    command = [sys.executable, "-c", _SPECS, json.dumps(COMPONENTS)]
    result = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def spec_figures(sizes: dict[str, int] | None = None) -> dict[str, dict]:
    """The container spec sizes the documents state (KiB, one decimal), each and as a range."""
    sys.path.insert(0, str(REPO_ROOT))
    from scripts.figures import figure

    sizes = sizes or spec_sizes()
    found = {f"delivery.{name}.container_spec": figure(n, "bytes", f"{n / 1024:.1f}") for name, n in sizes.items()}
    low, high = min(sizes.values()), max(sizes.values())
    found["delivery.container_spec.range"] = figure([low, high], "bytes", f"{low / 1024:.1f}–{high / 1024:.1f}")
    return found


def main() -> None:
    """Prints one row per component; ``--write-figures`` records them."""
    print("| component | import (s) | kfp import (s) | image | container spec (KiB) |")
    print("|---|---|---|---|---|")
    measured = {}
    for name, module in COMPONENTS.items():
        figures = measured[name] = probe(module, name)
        print(
            f"| {name} | {figures['component']:.3f} | {figures['kfp']:.2f} | `{figures['image']}` "
            f"| {figures['container_spec'] / 1024:.1f} |",
            flush=True,
        )
    if "--write-figures" in sys.argv:
        sys.path.insert(0, str(REPO_ROOT))
        from scripts.figures import figure, record

        found = spec_figures({name: figures["container_spec"] for name, figures in measured.items()})
        for name, figures in measured.items():
            seconds = figures["component"]
            found[f"delivery.{name}.import_seconds"] = figure(round(seconds, 3), "s", f"{seconds:.3f}")
        imports = [figures["component"] for figures in measured.values()]
        kfp = [figures["kfp"] for figures in measured.values()]
        found["delivery.import_seconds.range"] = figure(
            [min(imports), max(imports)], "s", f"{min(imports):.3f}–{max(imports):.3f}"
        )
        found["delivery.kfp_import_seconds.range"] = figure([min(kfp), max(kfp)], "s", f"{min(kfp):.2f}–{max(kfp):.2f}")
        record(found, "benchmarks/component_delivery.py")


if __name__ == "__main__":
    main()
