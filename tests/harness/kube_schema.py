"""What a real API server does with a CRD-backed object's fields, for the Kubernetes emulator (:mod:`.kube`).

:data:`GENERATIONS` are the TrainJob API generations served, each from a vendored CRD (``tests/specs/crds``).
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

CRDS = Path(__file__).resolve().parents[1] / "specs" / "crds"
UPSTREAM_2_3 = "upstream-2.3"
ODH_3_3 = "odh-3.3"
#: The TrainJob CRD file of each generation the emulator serves.
GENERATIONS = {
    UPSTREAM_2_3: "trainer.kubeflow.org_trainjobs.yaml",
    ODH_3_3: "odh-3.3/trainer.kubeflow.org_trainjobs.yaml",
}
TRAINJOB_SCHEMA = "io.kubeflow.trainer.v1alpha1.TrainJob"
#: The CRD files of the other CRD-backed resources the emulator prunes, by plural.
OTHER_CRDS = {
    "pytorchjobs": "kubeflow.org_pytorchjobs.yaml",
    "lmevaljobs": "trustyai.opendatahub.io_lmevaljobs.yaml",
    "hardwareprofiles": "infrastructure.opendatahub.io_hardwareprofiles.yaml",
}
#: The kind of each CRD-backed plural, as a strict decoding error names it.
KINDS = {
    "trainjobs": "TrainJob",
    "pytorchjobs": "PyTorchJob",
    "lmevaljobs": "LMEvalJob",
    "hardwareprofiles": "HardwareProfile",
}


@functools.lru_cache(maxsize=None)
def crd_document(file_name: str) -> dict[str, Any]:
    """A vendored CRD (parsed once per process; treat it as read-only)."""
    import yaml

    try:
        loader: Any = yaml.CSafeLoader
    except AttributeError:  # pragma: no cover - PyYAML without libyaml
        loader = yaml.SafeLoader
    documents = [doc for doc in yaml.load_all((CRDS / file_name).read_text(), Loader=loader) if doc]
    return documents[0]


def crd_schema_of(file_name: str) -> dict[str, Any]:
    """The ``openAPIV3Schema`` of a vendored CRD's first version (read-only)."""
    return crd_document(file_name)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def schema_for(plural: str, generation: str) -> dict[str, Any] | None:
    """The structural schema the emulator prunes ``plural`` by (None: a built-in or schemaless resource)."""
    if plural == "trainjobs":
        return crd_schema_of(GENERATIONS[generation])
    if plural in OTHER_CRDS:
        return crd_schema_of(OTHER_CRDS[plural])
    return None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def prune(value: Any, schema: Any, path: str = "") -> tuple[Any, list[str]]:
    """``value`` pruned by a structural schema (root ``metadata`` left alone), and the pruned paths (``a.b[0].c``)."""
    pruned: list[str] = []

    def walk(node: Any, node_schema: Any, where: str) -> Any:
        if not isinstance(node_schema, dict):
            return node
        if isinstance(node, dict):
            properties = node_schema.get("properties")
            additional = node_schema.get("additionalProperties")
            preserve = bool(node_schema.get("x-kubernetes-preserve-unknown-fields"))
            if properties is None:
                if isinstance(additional, dict):
                    return {key: walk(item, additional, f"{where}[{key}]") for key, item in node.items()}
                return node  # free-form object
            kept: dict[str, Any] = {}
            for key, item in node.items():
                if key in properties:
                    root_metadata = not where and key == "metadata"
                    kept[key] = item if root_metadata else walk(item, properties[key], _join(where, key))
                elif isinstance(additional, dict):
                    kept[key] = walk(item, additional, _join(where, key))
                elif additional is True or preserve:
                    kept[key] = item
                else:
                    pruned.append(_join(where, key))
            return kept
        if isinstance(node, list):
            items = node_schema.get("items")
            return [walk(item, items, f"{where}[{index}]") for index, item in enumerate(node)]
        return node

    result = walk(value, schema, path)
    return result, pruned


def strict_error_message(kind: str, version: str, fields: list[str]) -> str:
    """The API server's message for a Strict request with unknown fields (a ``400 BadRequest``)."""
    unknown = ", ".join(f'unknown field "{field}"' for field in fields)
    return f'{kind} in version "{version}" cannot be handled as a {kind}: strict decoding error: {unknown}'


def warning_header(field: str) -> str:
    """One ``Warning`` header value for a pruned field (default ``fieldValidation=Warn``)."""
    return f"299 - {json.dumps(f'unknown field {json.dumps(field)}')}"


@functools.lru_cache(maxsize=None)
def _openapi_v3_text(generation: str) -> str:
    schema = copy.deepcopy(crd_schema_of(GENERATIONS[generation]))
    gvk = [{"group": "trainer.kubeflow.org", "kind": "TrainJob", "version": "v1alpha1"}]
    schema["properties"]["metadata"] = {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
    schema["x-kubernetes-group-version-kind"] = gvk
    listing = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"$ref": f"#/components/schemas/{TRAINJOB_SCHEMA}"}}},
        "x-kubernetes-group-version-kind": [{**gvk[0], "kind": "TrainJobList"}],
    }
    document = {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
        "paths": {"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs": {}},
        "components": {
            "schemas": {
                TRAINJOB_SCHEMA: schema,
                "io.kubeflow.trainer.v1alpha1.TrainJobList": listing,
                "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object"},
            }
        },
    }
    return json.dumps(document)


def openapi_v3_document(generation: str) -> dict[str, Any]:
    """``GET /openapi/v3/apis/trainer.kubeflow.org/v1alpha1`` for a generation (a fresh copy)."""
    return json.loads(_openapi_v3_text(generation))
