r"""How large the Argo ``Workflow`` object of each pipeline grows through a full run, against ``MAX_WORKFLOW_SIZE``.

KFP's Argo backend turns a compiled pipeline into one ``Workflow`` (``backend/src/v2/compiler/argocompiler/``); the
Argo controller keeps the whole object, and every node's inputs and outputs in ``status.nodes``, under
``MAX_WORKFLOW_SIZE`` (default 1 MiB) or fails the run with "workflow is longer than maximum allowed size" (Argo
``workflow/packer/packer.go``, the same at v3.6.7, KFP 2.14.3's Argo, and v3.7.8, KFP 2.16.1's: ``getMaxWorkflowSize``
lines 16-22, default ``1024 * 1024`` line 19; ``getSize`` lines 43-49 is ``len(json.Marshal(wf))``; above the limit
``compressWorkflow`` lines 73-97 replaces ``status.nodes`` by base64 of gzip, line 79, and fails if still too large).

The model builds that object the way the backend sources RHOAI ships do (KFP 2.14.3 on RHOAI 3.3, 2.16.x on
3.4-3.6; line numbers ``2.14.3`` / ``2.16.1`` of kubeflow/pipelines):

- ``spec.arguments.parameters``: every component spec (``components-<hash>``), container spec
  (``implementations-<hash>``) and Kubernetes executor config (``kubernetes-<component>``) once, as JSON strings
  (``argo.go`` ``saveComponentSpec`` 240/277, ``saveComponentImpl`` 254/291, ``saveKubernetesSpec`` 266/303,
  ``saveProtoToArguments`` 281-300/318-337 with ``stablyMarshalJSON``, ``proto.go`` 26: Go ``encoding/json``;
  keyed by a hash of the container, ``hashComponentContainer`` 318/355, so two tasks of one container share one).
- ``spec.templates``: the entrypoint with the root DAG's driver and the run's ``runtime_config`` inline (``dag.go``
  ``DAG`` 146-177/149-180, ``dagDriverTask`` 488-546/504-562), the root DAG with two tasks per step whose driver
  arguments hold the task spec inline (``dag.go`` ``task`` 218-343/222-347, ``taskSpecJson`` 233/237,
  ``containerDriverTask`` call 286-294), and the shared system templates (``container.go``
  ``addContainerDriverTemplate`` 182-250/185-280, ``addContainerExecutorTemplate`` 321-.../356-..., ``dag.go``
  ``addDAGDriverTemplate`` 548/564).
- ``status.nodes`` after every step ran: per step, the driver pod's inputs (the component spec, the task spec, the
  container spec and the Kubernetes config, each again: ``containerDriverTask`` 148-180/151-183) and its
  ``pod-spec-patch`` output (``addContainerDriverTemplate`` outputs 234/264), the executor DAG node's inputs and the
  executor pod's inputs, the same ``pod-spec-patch`` twice more (``containerExecutorTask`` 269-314/304-349,
  ``addContainerExecutorTemplate`` 380/415 and ``PodSpecPatch: inputValue(...)`` 426/461). The pod spec patch is the
  driver's ``initPodSpecPatch`` (``backend/src/v2/driver/driver.go`` 155-324 / 238-...): the user command and args
  (183-185/282-284) behind the launcher's command, which carries the resolved executor input and the component spec
  as two JSON arguments (``--executor_input`` 192/291, ``--component_spec`` 193/292), written as JSON by
  ``backend/src/v2/cmd/driver/main.go`` (295/343); then the Kubernetes config (secrets as env, volumes, node
  selector, pull policy: ``driver/k8s.go``). The root DAG driver's node holds the root component spec and the
  runtime config once more.
- ``metadata.managedFields``: the field set of the whole object (keys, no values), as the API server records it.

The model is ``benchmarks/argo_workflow.py``. "Every optional step on": every task of the pipeline runs (the six
have no conditional branch: the base model's evaluation, the modelcar push and the deployment are run-time
parameters of tasks that always run), every string parameter left empty by default is given
``argo_workflow.FILLED_PARAMETER_BYTES``, every boolean is true, and every input artifact carries
``argo_workflow.ARTIFACT_METADATA_BYTES`` of metadata. Sizes are UTF-8 bytes of Go-style JSON (compact, ``<``,
``>`` and ``&`` escaped as ``\u003c``...) of the nested JSON strings, so each level of quoting costs what it costs
in the real object.

Usage: ``python benchmarks/workflow_size.py [--tasks] [--write-figures]`` (compiles the pipelines with default
settings; ``--tasks`` prints ``status.nodes`` per task too; ``--write-figures`` records the documents' figures,
:func:`figures`, in ``docs/figures.json``, as ``scripts/figures.py --write`` does; ``tests/test_workflow_size.py``
keeps each under :data:`LIMIT_BYTES`, ``tests/test_figures.py`` keeps the documents' figures current).
"""

from __future__ import annotations

import base64
import gzip
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.argo_workflow import RELEASES, go_json, size_of, workflow  # noqa: E402

#: Argo's default ``MAX_WORKFLOW_SIZE`` (``workflow/packer/packer.go`` line 19).
MAX_WORKFLOW_SIZE = 1024 * 1024
#: What the project allows itself: half of it, the rest for what the model leaves out (retries, a cluster's CA
#: bundle and proxy settings, longer names, larger artifact metadata).
LIMIT_BYTES = MAX_WORKFLOW_SIZE // 2


def breakdown(document: dict) -> dict[str, int]:
    """Bytes of the whole object and of its parts; ``compressed``: the whole once Argo gzips ``status.nodes``."""
    nodes = document["status"]["nodes"]
    packed = dict(document, status=dict(document["status"], nodes={}))
    packed["status"]["compressedNodes"] = base64.b64encode(gzip.compress(go_json(nodes).encode())).decode()
    patches = [
        len(parameter["value"].encode())
        for entry in nodes.values()
        for parameter in entry["outputs"]["parameters"]
        if parameter["name"] == "pod-spec-patch"
    ]
    return {
        "total": size_of(document),
        "arguments": size_of(document["spec"]["arguments"]),
        "templates": size_of(document["spec"]["templates"]),
        "nodes": size_of(nodes),
        "managed_fields": size_of(document["metadata"]["managedFields"]),
        "largest_pod_spec_patch": max(patches),
        "compressed": size_of(packed),
    }


def by_task(document: dict) -> dict[str, int]:
    """Bytes of ``status.nodes`` per task: its driver's, its executor DAG's and its executor pod's nodes.

    The executor pods are all named ``executor``: each is counted with the task whose ``pod-spec-patch`` it carries.
    """
    nodes = document["status"]["nodes"].values()
    patches = {}
    for entry in nodes:
        for parameter in entry["outputs"]["parameters"]:
            if parameter["name"] == "pod-spec-patch":
                patches[parameter["value"]] = entry["displayName"].removesuffix("-driver")
    sizes: dict[str, int] = {}
    for entry in nodes:
        values = [parameter["value"] for parameter in entry["inputs"]["parameters"]]
        task = next((patches[value] for value in values if value in patches), entry["displayName"])
        task = task.removesuffix("-driver")
        sizes[task] = sizes.get(task, 0) + size_of(entry)
    return dict(sorted(sizes.items(), key=lambda item: -item[1]))


def model_compiled(path: Path, release: str = RELEASES[0]) -> dict:
    """The Workflow of a compiled pipeline YAML (the pipeline spec and its Kubernetes platform spec)."""
    documents = list(yaml.safe_load_all(path.read_text()))
    return workflow(documents[0], documents[1] if len(documents) > 1 else {}, release)


EXPERT = ("sft", "osft", "lora")
MINIMAL = ("sft-minimal", "osft-minimal", "lora-minimal")
#: The table's columns: (heading, key of :func:`breakdown`).
COLUMNS = (
    ("total", "total"),
    ("`spec.arguments`", "arguments"),
    ("`spec.templates`", "templates"),
    ("`status.nodes`", "nodes"),
    ("largest pod spec patch", "largest_pod_spec_patch"),
    ("total, `status.nodes` gzipped", "compressed"),
)
#: ``sft`` with the code embedded in each command (KFP 2.14.3, KiB), measured by this script before issue 43 put
#: every step on the project's image (first stated in ``a4260b6``): today's code cannot rebuild it.
EMBEDDED_BEFORE = (1712.0, 274.6, 32.6, 1395.8, 95.5, 1389.6)


def sizes_by_pipeline() -> dict[str, dict[str, dict[str, int]]]:
    """``{pipeline: {KFP release: breakdown}}`` of the six pipelines compiled with default settings."""
    from pipelines.compile import CompileSettings, compile_named
    from pipelines.training.finetuning import PIPELINES

    with tempfile.TemporaryDirectory(prefix="workflow-size-") as out:
        paths = {name: compile_named(name, Path(out) / f"{name}.yaml", CompileSettings()) for name in PIPELINES}
        return {
            name: {release: breakdown(model_compiled(path, release)) for release in RELEASES}
            for name, path in paths.items()
        }


def _kib_range(values: list[float]) -> str:
    """``496–511`` (KiB, rounded), or one number when both ends round alike."""
    low, high = f"{min(values) / 1024:,.0f}", f"{max(values) / 1024:,.0f}"
    return low if low == high else f"{low}–{high}"


def figures(sizes: dict[str, dict[str, dict[str, int]]] | None = None) -> dict[str, dict]:
    """The figures the README and ``docs/architecture.md`` state: the table and the ranges (KiB)."""
    from scripts.figures import figure

    sizes = sizes or sizes_by_pipeline()
    rows = [
        "| pipeline | KFP | " + " | ".join(heading for heading, _ in COLUMNS) + " |",
        "|---" * (len(COLUMNS) + 2) + "|",
    ]
    for name, releases in sizes.items():
        for release, sizes_of_release in releases.items():
            cells = [f"{sizes_of_release[key] / 1024:,.1f}" for _, key in COLUMNS]
            rows.append(f"| {name} | {release} | " + " | ".join(cells) + " |")
    rows.append(
        f"| sft, code embedded (before) | {RELEASES[0]} | " + " | ".join(f"{v:,.1f}" for v in EMBEDDED_BEFORE) + " |"
    )

    def every(names: tuple[str, ...], key: str) -> list[float]:
        return [sizes[name][release][key] for name in names for release in RELEASES]

    largest = max(every(tuple(sizes), "total"))
    by_release = {release: [sizes[name][release]["total"] for name in EXPERT] for release in RELEASES}
    lora = max(sizes["lora"][release]["total"] for release in RELEASES)
    return {
        "workflow.table": figure(len(rows) - 2, "rows", "\n".join(rows)),
        "workflow.expert.total": figure(every(EXPERT, "total"), "bytes", _kib_range(every(EXPERT, "total"))),
        "workflow.expert.gzipped": figure(
            every(EXPERT, "compressed"), "bytes", _kib_range(every(EXPERT, "compressed"))
        ),
        "workflow.minimal.total": figure(every(MINIMAL, "total"), "bytes", _kib_range(every(MINIMAL, "total"))),
        "workflow.minimal.gzipped": figure(
            every(MINIMAL, "compressed"), "bytes", _kib_range(every(MINIMAL, "compressed"))
        ),
        **{f"workflow.expert.total.{release}": figure(t, "bytes", _kib_range(t)) for release, t in by_release.items()},
        "workflow.largest": figure(largest, "bytes", f"{largest / 1024:.0f}"),
        "workflow.lora.largest": figure(lora, "bytes", f"{lora / 1024:.1f}"),
        "workflow.lora.left": figure(LIMIT_BYTES - lora, "bytes", f"{(LIMIT_BYTES - lora) / 1024:.1f}"),
        "workflow.embedded_before.total": figure(EMBEDDED_BEFORE[0], "KiB", f"{EMBEDDED_BEFORE[0]:,.0f}"),
        "workflow.embedded_before.gzipped": figure(EMBEDDED_BEFORE[-1], "KiB", f"{EMBEDDED_BEFORE[-1]:,.0f}"),
    }


def main() -> int:
    """Compiles the six pipelines with default settings and prints each one's Workflow size per KFP release."""
    from pipelines.compile import CompileSettings, compile_named
    from pipelines.training.finetuning import PIPELINES

    out = Path(tempfile.mkdtemp(prefix="workflow-size-"))
    limits = f"limit {LIMIT_BYTES // 1024} KiB, Argo's MAX_WORKFLOW_SIZE {MAX_WORKFLOW_SIZE // 1024} KiB"
    print(f"Argo Workflow after a full run, every optional step on; KiB ({limits})")
    columns = ["pipeline", "KFP", "total", "spec.arguments", "spec.templates", "status.nodes", "managedFields"]
    columns += ["largest pod-spec-patch", "total, nodes gzipped"]
    print("| " + " | ".join(columns) + " |\n" + "|---" * len(columns) + "|")
    worst = 0
    for name in PIPELINES:
        path = compile_named(name, out / f"{name}.yaml", CompileSettings())
        for release in RELEASES:
            sizes = breakdown(model_compiled(path, release))
            worst = max(worst, sizes["total"])
            cells = [f"{sizes[key] / 1024:.1f}" for key in ("total", "arguments", "templates", "nodes")]
            cells += [f"{sizes[key] / 1024:.1f}" for key in ("managed_fields", "largest_pod_spec_patch", "compressed")]
            print(f"| {name} | {release} | " + " | ".join(cells) + " |")
        if "--tasks" in sys.argv:
            tasks = by_task(model_compiled(path, RELEASES[-1]))
            print(f"|   {name}, KFP {RELEASES[-1]}, status.nodes per task: " + ", ".join(
                f"{task} {size / 1024:.1f}" for task, size in tasks.items()) + " |")  # fmt: skip
    if "--write-figures" in sys.argv:
        from scripts.figures import record

        record(figures(), "benchmarks/workflow_size.py")
    return 0 if worst < LIMIT_BYTES else 1


if __name__ == "__main__":
    sys.exit(main())
