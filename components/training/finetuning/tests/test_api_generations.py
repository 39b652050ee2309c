"""Both TrainJob API generations: the builders against their own closed CRD (and refused by the other's), discovery's
reading, and every manifest over the option space scanned for explicit empty values (Kueue-safe).
"""

import itertools
import json

import jsonschema
import pytest
from kfp import dsl

from components.training.finetuning.manifests import kueue_safe
from components.training.finetuning.manifests.api_generations import (
    ASSUMED_GENERATION,
    POD_TEMPLATE_OVERRIDES,
    RUNTIME_PATCHES,
    TRAINER_2_3,
    TrainJobApi,
    assumed,
    manifest_api,
    other_generation,
    served_trainjob_api,
)
from components.training.finetuning.manifests.names import job_name
from components.training.finetuning.manifests.pytorchjob import build_pytorchjob
from components.training.finetuning.manifests.spec import SecretEnvVar
from components.training.finetuning.manifests.task_config import spec_from_task_config
from components.training.finetuning.manifests.trainjob import JOB_NAME_POD_LABEL, build_trainjob
from tests.harness.kube import ODH_3_3, UPSTREAM_2_3, crd_schema, validate_trainjob
from tests.harness.kube_schema import openapi_v3_document
from tests.harness.requests import job_spec_settings

RUN_ID = "4f6c3a2e-9b1d-4c8e-a2f0-1d2e3f4a5b6c"
RHOAI_3_3 = TrainJobApi(POD_TEMPLATE_OVERRIDES, active_deadline=False, trainer_status=False)
WORKSPACE_VOLUME = {"name": "kfp-workspace", "persistentVolumeClaim": {"claimName": "run-ws"}}
WORKSPACE_MOUNT = {"name": "kfp-workspace", "mountPath": "/kfp-workspace"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]}]
        }
    }
}
SECRETS = (
    SecretEnvVar("HF_TOKEN", "hf-token", "HF_TOKEN", True),
    SecretEnvVar("AWS_ACCESS_KEY_ID", "s3", "AWS_ACCESS_KEY_ID"),
)


def _full_spec(**overrides):
    fields = dict(
        run_id=RUN_ID,
        task_name="train-model",
        namespace="team-a",
        command=["python", "entrypoint.py"],
        volumes=[WORKSPACE_VOLUME],
        volume_mounts=[WORKSPACE_MOUNT],
        tolerations=[GPU_TOLERATION],
        node_selector={"nvidia.com/gpu.present": "true"},
        affinity=AFFINITY,
        pod_labels={"team": "nlp"},
        pod_annotations={"example.com/cost-center": "42"},
        secret_env=SECRETS,
        active_deadline_seconds=3600,
    )
    fields.update(overrides)
    return spec_from_task_config(None, **job_spec_settings(**fields))


def _pod_patch(manifest):
    """The pod template patch of either generation: (target jobs, metadata, pod spec)."""
    spec = manifest["spec"]
    if "podTemplateOverrides" in spec:
        (override,) = spec["podTemplateOverrides"]
        return [t["name"] for t in override["targetJobs"]], override.get("metadata"), override.get("spec")
    (patch,) = spec["runtimePatches"]
    (job,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    template = job["template"]["spec"]["template"]
    return [job["name"]], template.get("metadata"), template.get("spec")


@pytest.mark.parametrize("api, generation", [(TRAINER_2_3, UPSTREAM_2_3), (RHOAI_3_3, ODH_3_3)])
def test_each_generation_carries_the_same_pod_settings_and_passes_its_own_crd(api, generation):
    manifest = build_trainjob(_full_spec(), api)
    validate_trainjob(manifest, generation)
    targets, metadata, pod_spec = _pod_patch(manifest)
    assert targets == ["node"]
    assert metadata == {
        "labels": {"team": "nlp", JOB_NAME_POD_LABEL: job_name(RUN_ID, "train-model")},
        "annotations": {"example.com/cost-center": "42"},
    }
    assert pod_spec == {
        "volumes": [WORKSPACE_VOLUME],
        "containers": [{"name": "node", "volumeMounts": [WORKSPACE_MOUNT]}],
        "tolerations": [GPU_TOLERATION],
        "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "affinity": AFFINITY,
    }
    env = manifest["spec"]["trainer"]["env"]  # secrets: referenced in trainer.env, served by both generations
    assert {
        "name": "HF_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN", "optional": True}},
    } in env
    assert ("activeDeadlineSeconds" in manifest["spec"]) is api.active_deadline
    assert ("runtimePatches" in manifest["spec"], "podTemplateOverrides" in manifest["spec"]) == (
        api.generation == RUNTIME_PATCHES,
        api.generation == POD_TEMPLATE_OVERRIDES,
    )


@pytest.mark.parametrize("api, other", [(TRAINER_2_3, ODH_3_3), (RHOAI_3_3, UPSTREAM_2_3)])
def test_a_job_built_for_one_generation_is_refused_by_the_others_crd(api, other):
    """Closed objects = what a Strict create accepts: the other generation refuses the pod patch (and the deadline)."""
    manifest = build_trainjob(_full_spec(), api)
    with pytest.raises(jsonschema.ValidationError, match="Additional properties are not allowed"):
        validate_trainjob(manifest, other)


def test_discovery_reads_the_generation_from_the_openapi_v3_document_of_each_crd():
    assert served_trainjob_api(openapi_v3_document(UPSTREAM_2_3)) == TrainJobApi(RUNTIME_PATCHES, True, True)
    assert served_trainjob_api(openapi_v3_document(ODH_3_3)) == TrainJobApi(POD_TEMPLATE_OVERRIDES, False, False)
    assert served_trainjob_api({"components": {"schemas": {}}}) is None
    # A published schema may reference its spec instead of inlining it (as built-in types do).
    referenced = openapi_v3_document(ODH_3_3)
    schemas = referenced["components"]["schemas"]
    trainjob = schemas["io.kubeflow.trainer.v1alpha1.TrainJob"]
    schemas["io.kubeflow.trainer.v1alpha1.TrainJobSpec"] = trainjob["properties"]["spec"]
    ref = "#/components/schemas/io.kubeflow.trainer.v1alpha1.TrainJobSpec"
    trainjob["properties"]["spec"] = {"allOf": [{"$ref": ref}]}
    assert served_trainjob_api(referenced).generation == POD_TEMPLATE_OVERRIDES
    no_fields = openapi_v3_document(UPSTREAM_2_3)
    del no_fields["components"]["schemas"]["io.kubeflow.trainer.v1alpha1.TrainJob"]["properties"]["spec"]["properties"][
        "runtimePatches"
    ]
    assert served_trainjob_api(no_fields) is None


def test_assumed_generation_is_the_guides_platform_and_flips_once():
    guess = assumed(ASSUMED_GENERATION, "HTTP 403")
    assert guess.generation == POD_TEMPLATE_OVERRIDES and not guess.discovered and "HTTP 403" in guess.source
    flipped = other_generation(guess, "the cluster refused spec.podTemplateOverrides")
    assert flipped.generation == RUNTIME_PATCHES and flipped.active_deadline and not flipped.discovered
    assert "RHOAI 3.3-3.5" in manifest_api(build_trainjob(_full_spec(), RHOAI_3_3))
    assert "RHOAI >= 3.6" in manifest_api(build_trainjob(_full_spec(), TRAINER_2_3))
    assert "no spec.activeDeadlineSeconds" in RHOAI_3_3.consequences()


# -- Kueue-safe: no explicit empty value anywhere, over the option space ------------------------------------------
#: Fields whose zero or false is kept by a typed client (pointer fields) and means something.
POINTER_FIELDS = {"tolerationSeconds", "backoffLimit", "controller", "blockOwnerDeletion"}
#: Maps whose values are free strings (a typed client keeps map entries, empty or not).
FREE_MAPS = {"labels", "annotations", "nodeSelector"}


def empty_values(node, path="", parent=""):
    """Every explicit empty value a typed client would drop: ``"", None, False, [], {}`` and 0 outside pointers."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            where = f"{path}.{key}"
            in_volume = parent == "volumes" and key != "name"  # a volume source: emptyDir: {} is kept
            if parent in FREE_MAPS:
                continue
            if kueue_safe.is_empty(value) and not (in_volume and value == {}) and key not in POINTER_FIELDS:
                found.append(where)
            elif value == 0 and not isinstance(value, bool) and key not in POINTER_FIELDS:
                found.append(where)
            else:
                found += empty_values(value, where, key)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            if kueue_safe.is_empty(item):
                found.append(f"{path}[{index}]")
            else:
                found += empty_values(item, f"{path}[{index}]", "volumes" if path.endswith(".volumes") else parent)
    return found


#: A task config as KFP or a user may hand it over, full of explicit empty values.
EMPTY_LADEN_TASK_CONFIG = dsl.TaskConfig(
    volumes=[
        {"name": "kfp-workspace", "persistentVolumeClaim": {"claimName": "run-ws", "readOnly": False}},
        {"name": "scratch", "emptyDir": {}},
    ],
    volume_mounts=[
        {"name": "kfp-workspace", "mountPath": "/kfp-workspace", "readOnly": False, "subPath": ""},
        {"name": "scratch", "mountPath": "/scratch"},
    ],
    env=[{"name": "EMPTY_ON_PURPOSE", "value": ""}, {"name": "HTTPS_PROXY", "value": "http://proxy:3128"}],
    tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "", "value": ""}],
    affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}, "podAffinity": {}},
)
OPTIONS = {
    "task_config": [None, EMPTY_LADEN_TASK_CONFIG],
    "extras": [
        {},
        {
            "image": "quay.io/example/trainer:1",
            "cpu_per_node": "8",
            "memory_per_node": "64Gi",
            "gpus_per_node": 2,
            "num_nodes": 3,
            "queue_name": "team-queue",
            "pod_labels": {"team": "nlp"},
            "pod_annotations": {"a.example.com/x": "y"},
            "secret_env": SECRETS,
            "env": {"EMPTY_TOO": ""},
            "node_selector": {"nvidia.com/gpu.present": "true"},
            "tolerations": [{"key": "spot", "operator": "Equal", "value": "true", "tolerationSeconds": 0}],
            "active_deadline_seconds": 7200,
            "progress_tracking": False,
        },
    ],
    "builder": ["trainjob-2.3", "trainjob-rhoai-3.3", "pytorchjob"],
}


@pytest.mark.parametrize("task_config, extras, builder", list(itertools.product(*OPTIONS.values())))
def test_no_manifest_carries_an_explicit_empty_value(task_config, extras, builder):
    fields = dict(run_id=RUN_ID, task_name="train-model", namespace="team-a", command=["python", "entrypoint.py"])
    if builder == "pytorchjob":
        fields["image"] = "quay.io/example/trainer:1"
    spec = spec_from_task_config(task_config, **job_spec_settings(**{**fields, **extras}))
    if builder == "pytorchjob":
        manifest = build_pytorchjob(spec)
        jsonschema.Draft7Validator(crd_schema("kubeflow.org_pytorchjobs.yaml")).validate(manifest)
    else:
        api = RHOAI_3_3 if builder == "trainjob-rhoai-3.3" else TRAINER_2_3
        manifest = build_trainjob(spec, api)
        validate_trainjob(manifest, ODH_3_3 if api is RHOAI_3_3 else UPSTREAM_2_3)
    assert empty_values(manifest) == [], json.dumps(manifest, indent=1)
    text = json.dumps(manifest)
    if task_config is not None:  # the empties went, what they stood beside stayed
        assert '"emptyDir": {}' in text and '"claimName": "run-ws"' in text and '{"name": "EMPTY_ON_PURPOSE"}' in text
        assert '"readOnly"' not in text and '"subPath"' not in text and '"effect"' not in text
    if "tolerations" in extras:
        assert '"tolerationSeconds": 0' in text  # a pointer field: zero means "evict at once" and is kept


def test_the_scanner_finds_what_a_typed_client_drops():
    """The scanner itself can fail: today's HEAD wrote ``env[].value: ""`` and ``readOnly: false``."""
    bad = {"spec": {"env": [{"name": "A", "value": ""}], "volumeMounts": [{"name": "w", "readOnly": False}], "x": []}}
    assert empty_values(bad) == [".spec.env[0].value", ".spec.volumeMounts[0].readOnly", ".spec.x"]
    assert empty_values({"volumes": [{"name": "s", "emptyDir": {}}], "labels": {"a": ""}}) == []
