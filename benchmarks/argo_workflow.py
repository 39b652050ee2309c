"""The Argo ``Workflow`` KFP's Argo backend builds for a compiled pipeline, after a full run (a model, for its size).

The sources this follows, with their line numbers, are in ``benchmarks/workflow_size.py``'s docstring. What is left
out does not grow with the pipeline (exact label sets, retries, a CA bundle's mounts) or is an allowance here
(:data:`FILLED_PARAMETER_BYTES`, :data:`ARTIFACT_METADATA_BYTES`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

#: A string parameter left empty by default gets this many bytes when every optional step is on (a modelcar URI, a
#: registry address, a tokenizer, a description are all shorter).
FILLED_PARAMETER_BYTES = 256
#: Metadata each input artifact carries into the executor input (the driver resolves it from ML Metadata). The
#: largest a step writes is the Model's: 22 hyperparameters, the base model, the checkpoint path and the job, ~1.5 KiB.
ARTIFACT_METADATA_BYTES = 2048
#: The KFP releases modelled (RHOAI 3.3 ships 2.14.3, RHOAI 3.4-3.6 2.16.x).
RELEASES = ("2.14.3", "2.16.1")
RUN_ID = "0b3e8c52-7d0f-4a57-9a1e-2f6c1d9b8a40"
NAME = "pipeline-x7k2q"
_TIME = "2026-12-06T06:30:00Z"
_BUCKET = f"s3://pipelines-bucket/{NAME}/{RUN_ID}"
_SERVICES = ["--mlmd_server_address", "ds-pipeline-metadata-grpc-dspa.team.svc", "--mlmd_server_port", "8080"]
_SERVICES_2_16 = ["--ml_pipeline_server_address", "ds-pipeline-dspa.team.svc", "--ml_pipeline_server_port", "8887"]
_SERVICES_2_16 += ["--ml_pipeline_tls_enabled", "--ca_cert_path", "/etc/pki/tls/certs/ca.crt"]


def go_json(value: Any) -> str:
    """``value`` as Go's ``encoding/json`` writes it: compact, sorted map keys, UTF-8, ``<>&`` escaped."""
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def size_of(value: Any) -> int:
    """Bytes of ``value`` in Go-style JSON."""
    return len(go_json(value).encode())


def run_values(spec: dict) -> dict[str, Any]:
    """The run's parameter values with every optional step on: booleans true, empty strings filled, else defaults."""
    values: dict[str, Any] = {}
    for name, parameter in spec["root"].get("inputDefinitions", {}).get("parameters", {}).items():
        kind, default = parameter.get("parameterType"), parameter.get("defaultValue")
        if kind == "BOOLEAN":
            values[name] = True
        elif default not in (None, ""):
            values[name] = default
        else:
            values[name] = 0 if kind in ("NUMBER_INTEGER", "NUMBER_DOUBLE") else "x" * FILLED_PARAMETER_BYTES
    return values


def executor_input(task_name: str, task: dict, component: dict, values: dict) -> dict:
    """The driver's resolved ``ExecutorInput`` of one task: parameter values, input artifacts, output locations."""
    parameters = {}
    for name, source in task.get("inputs", {}).get("parameters", {}).items():
        if "componentInputParameter" in source:
            parameters[name] = values.get(source["componentInputParameter"])
        else:
            parameters[name] = source.get("runtimeValue", {}).get("constant", "x" * FILLED_PARAMETER_BYTES)
    definitions = component.get("inputDefinitions", {}).get("artifacts", {})
    artifacts = {}
    for name, source in task.get("inputs", {}).get("artifacts", {}).items():
        producer = source.get("taskOutputArtifact", {})
        artifact = {
            "name": "1234",
            "type": definitions.get(name, {}).get("artifactType", {}),
            "uri": f"{_BUCKET}/{producer.get('producerTask')}/{producer.get('outputArtifactKey')}",
            "metadata": {"allowance": "x" * ARTIFACT_METADATA_BYTES},
        }
        artifacts[name] = {"artifacts": [artifact]}
    outputs = component.get("outputDefinitions", {})
    output_artifacts = {
        name: {"artifacts": [{"type": d.get("artifactType", {}), "uri": f"{_BUCKET}/{task_name}/{name}"}]}
        for name, d in outputs.get("artifacts", {}).items()
    }
    return {
        "inputs": {"parameterValues": parameters, "artifacts": artifacts},
        "outputs": {
            "parameters": {name: {"outputFile": f"/tmp/kfp/outputs/{name}"} for name in outputs.get("parameters", {})},
            "artifacts": output_artifacts,
            "outputFile": "/tmp/kfp_outputs/output_metadata.json",
        },
    }


def pod_spec_patch(
    release: str,
    pipeline: str,
    task_name: str,
    task: dict,
    component: dict,
    container: dict,
    kubernetes: dict,
    values: dict,
) -> str:
    """The driver's ``pod-spec-patch`` of one task, as JSON.

    The launcher's command (the executor input and the component spec as JSON arguments) before the user command,
    the resources, env (the secrets of the Kubernetes config) and the workspace.
    """
    command = ["/kfp-launcher/launch", "--pipeline_name", pipeline, "--run_id", RUN_ID, "--execution_id", "4711"]
    command += ["--executor_input", go_json(executor_input(task_name, task, component, values))]
    command += ["--component_spec", go_json(component), "--pod_name", "$(KFP_POD_NAME)", "--pod_uid", "$(KFP_POD_UID)"]
    command += [*(_SERVICES_2_16 if release >= "2.16" else []), *_SERVICES, "--publish_logs", "false", "--"]
    resources = container.get("resources", {})
    limits = {"cpu": resources.get("resourceCpuLimit"), "memory": resources.get("resourceMemoryLimit")}
    if resources.get("accelerator"):
        limits[resources["accelerator"]["resourceType"]] = resources["accelerator"].get("resourceCount", "1")
    requests = {"cpu": resources.get("resourceCpuRequest"), "memory": resources.get("resourceMemoryRequest")}
    env: list[dict] = [{"name": e["name"], "value": e.get("value", "")} for e in container.get("env", [])]
    for secret in kubernetes.get("secretAsEnv", []):
        for pair in secret.get("keyToEnv", []):
            reference = {"key": pair["secretKey"], "name": secret.get("secretName", ""), "optional": True}
            env.append({"name": pair["envVar"], "valueFrom": {"secretKeyRef": reference}})
    main = {
        "name": "main",
        "image": container["image"],
        "imagePullPolicy": kubernetes.get("imagePullPolicy", ""),
        "command": command,
        "args": [*container.get("command", []), *container.get("args", [])],
        "resources": {"limits": limits, "requests": requests},
        "env": env,
        "volumeMounts": [{"name": "kfp-workspace", "mountPath": "/kfp-workspace"}],
    }
    workspace = {"name": "kfp-workspace", "persistentVolumeClaim": {"claimName": f"{NAME}-kfp-workspace"}}
    patch = {"containers": [main], "volumes": [workspace]}
    if kubernetes.get("nodeSelector"):
        patch["nodeSelector"] = kubernetes["nodeSelector"].get("labels", {})
    return go_json(patch)


def _parameters(values: dict[str, str]) -> list[dict]:
    return [{"name": name, "value": value} for name, value in values.items()]


def node(node_id: str, name: str, kind: str, template: str, inputs: dict, outputs: dict, children=()) -> dict:
    """One finished ``status.nodes`` entry as Argo v3.6/v3.7 keeps it (a pod's logs archived as ``main-logs``)."""
    entry: dict[str, Any] = {
        "id": node_id,
        "name": name,
        "displayName": name.rsplit(".", 1)[-1],
        "type": kind,
        "templateName": template,
        "templateScope": f"local/{NAME}",
        "phase": "Succeeded",
        "boundaryID": f"{NAME}-1000000002",
        "startedAt": _TIME,
        "finishedAt": _TIME,
        "progress": "1/1",
        "resourcesDuration": {"cpu": 120, "memory": 3600},
        "inputs": {"parameters": _parameters(inputs)},
        "outputs": {"parameters": _parameters(outputs)},
    }
    if kind == "Pod":
        logs = {"name": "main-logs", "s3": {"key": f"{NAME}/{NAME}-{template}-{node_id[-10:]}/main.log"}}
        entry.update(hostNodeName="worker-gpu-0.cluster.example.com", taskResultSynced=True)
        entry["outputs"].update(artifacts=[logs], exitCode="0")
    if children:
        entry.update(children=list(children), outboundNodes=[children[-1]])
    return entry


def system_templates(pipeline: str, release: str) -> list[dict]:
    """The driver and executor templates all tasks share (``container.go``, ``dag.go``): fixed-size boilerplate."""
    driver_inputs = ["component", "task", "container", "task-name", "parent-dag-id", "iteration-index"]
    driver_inputs += ["kubernetes-config", "runtime-config", "driver-type"]
    arguments = ["--type", "CONTAINER", "--pipeline_name", pipeline, "--run_id", "{{workflow.labels.pipeline/runid}}"]
    arguments += [
        f"--{p.replace('-', '_')}" if i % 2 == 0 else "{{inputs.parameters.%s}}" % p
        for p in driver_inputs
        for i in range(2)
    ]
    arguments += ["--http_proxy", "", "--https_proxy", "", "--no_proxy", "", *_SERVICES]
    arguments += _SERVICES_2_16 if release >= "2.16" else []
    outputs = [{"name": n, "valueFrom": {"path": f"/tmp/outputs/{n}", "default": ""}} for n in ("pod-spec-patch",)]
    outputs += [{"name": n, "valueFrom": {"path": f"/tmp/outputs/{n}", "default": "0"}} for n in ("execution-id",)]
    outputs += [{"name": n, "valueFrom": {"path": f"/tmp/outputs/{n}"}} for n in ("cached-decision", "condition")]
    image = "registry.redhat.io/rhoai/odh-ml-pipelines-driver-rhel9@sha256:" + "0" * 64
    resources = {"limits": {"cpu": "500m", "memory": "512Mi"}, "requests": {"cpu": "100m", "memory": "64Mi"}}
    container = {"image": image, "command": ["driver"], "args": arguments, "resources": resources}
    driver = {"container": container, "inputs": {"parameters": [{"name": n} for n in driver_inputs]}}
    driver["outputs"] = {"parameters": outputs}
    scratch = ["kfp-launcher", "gcs-scratch", "s3-scratch", "minio-scratch", "dot-local", "dot-cache", "dot-config"]
    launcher = {"name": "kfp-launcher", "image": image.replace("driver", "launcher"), "command": ["launcher-v2"]}
    launcher.update(args=["--copy", "/kfp-launcher/launch"], resources=resources)
    fields = [
        {"name": n, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.{n[8:].lower()}"}}}
        for n in ("KFP_POD_NAME", "KFP_POD_UID")
    ]
    impl = {
        "name": "system-container-impl",
        "inputs": {"parameters": [{"name": "pod-spec-patch"}]},
        "podSpecPatch": "{{inputs.parameters.pod-spec-patch}}",
        "volumes": [{"name": n, "emptyDir": {}} for n in scratch],
        "initContainers": [launcher],
        "container": {
            "image": "gcr.io/ml-pipeline/should-be-overridden-during-runtime",
            "command": ["should-be-overridden-during-runtime"],
            "volumeMounts": [{"name": n, "mountPath": f"/{n}"} for n in scratch],
            "envFrom": [{"configMapRef": {"name": "metadata-grpc-configmap", "optional": True}}],
            "env": fields,
        },
    }
    executor_task = {"name": "executor", "template": "system-container-impl"}
    executor_task["arguments"] = {"parameters": _parameters({"pod-spec-patch": "{{inputs.parameters.pod-spec-patch}}"})}
    executor_task["when"] = "{{inputs.parameters.cached-decision}} != true"
    executor = {"name": "system-container-executor", "dag": {"tasks": [executor_task]}}
    executor["inputs"] = {"parameters": [{"name": "pod-spec-patch"}, {"name": "cached-decision", "default": "false"}]}
    return [dict(driver, name="system-container-driver"), dict(driver, name="system-dag-driver"), executor, impl]


def workflow(spec: dict, platform: dict, release: str = RELEASES[0]) -> dict:
    """The ``Workflow`` of one compiled pipeline (its two YAML documents) after every task ran on ``release``."""
    pipeline, values = spec["pipelineInfo"]["name"], run_values(spec)
    configs = platform.get("platforms", {}).get("kubernetes", {}).get("deploymentSpec", {}).get("executors", {})
    arguments = {"components-root": go_json(spec["root"])}
    runtime_config = go_json({"gcsOutputDirectory": "s3://pipelines-bucket", "parameterValues": values})
    nodes: dict[str, dict] = {}
    tasks: list[dict] = []
    for index, (name, task) in enumerate(sorted(spec["root"]["dag"]["tasks"].items())):
        component_name = task["componentRef"]["name"]
        component = spec["components"][component_name]
        container = spec["deploymentSpec"]["executors"][component["executorLabel"]]["container"]
        kubernetes = configs.get(component["executorLabel"], {})
        digest = hashlib.sha256(go_json(container).encode()).hexdigest()  # hashComponentContainer
        arguments.setdefault(f"components-{digest}", go_json(component))
        arguments.setdefault(f"implementations-{digest}", go_json(container))
        arguments.setdefault(f"kubernetes-{component_name}", go_json(kubernetes))
        placeholders = {
            "component": f"{{{{workflow.parameters.components-{digest}}}}}",
            "task": go_json(task),
            "container": f"{{{{workflow.parameters.implementations-{digest}}}}}",
            "task-name": name,
            "parent-dag-id": "{{inputs.parameters.parent-dag-id}}",
            "kubernetes-config": f"{{{{workflow.parameters.kubernetes-{component_name}}}}}",
        }
        depends = " && ".join(f"{d}.Succeeded" for d in task.get("dependentTasks", []))
        tasks.append({"name": f"{name}-driver", "template": "system-container-driver", "depends": depends})
        tasks[-1]["arguments"] = {"parameters": _parameters(placeholders)}
        patch_of = {
            p: f"{{{{tasks.{name}-driver.outputs.parameters.{p}}}}}" for p in ("pod-spec-patch", "cached-decision")
        }
        tasks.append({"name": name, "template": "system-container-executor", "depends": f"{name}-driver.Succeeded"})
        tasks[-1]["arguments"] = {"parameters": _parameters(patch_of)}
        patch = pod_spec_patch(release, pipeline, name, task, component, container, kubernetes, values)
        resolved = dict(placeholders, component=go_json(component), container=go_json(container))
        resolved.update({"parent-dag-id": "4700", "iteration-index": "-1", "kubernetes-config": go_json(kubernetes)})
        outputs = {"pod-spec-patch": patch, "cached-decision": "false", "condition": "true"}
        driver, executor, impl = (f"{NAME}-{2000000000 + 10 * index + offset}" for offset in range(3))
        path = f"{NAME}.root.{name}"
        nodes[driver] = node(driver, f"{path}-driver", "Pod", "system-container-driver", resolved, outputs)
        inputs = {"pod-spec-patch": patch, "cached-decision": "false"}
        nodes[executor] = node(executor, path, "DAG", "system-container-executor", inputs, {}, [impl])
        nodes[impl] = node(impl, f"{path}.executor", "Pod", "system-container-impl", {"pod-spec-patch": patch}, {})
    root_driver = {"component": "{{workflow.parameters.components-root}}", "runtime-config": runtime_config}
    root_driver["driver-type"] = "ROOT_DAG"
    resolved = dict(root_driver, component=arguments["components-root"], task="", **{"task-name": ""})
    resolved.update({"parent-dag-id": "0", "iteration-index": "-1"})
    outputs = {"execution-id": "4700", "iteration-count": "0", "condition": "true"}
    step_nodes = list(nodes)
    nodes[f"{NAME}-1000000001"] = node(
        f"{NAME}-1000000001", f"{NAME}.root-driver", "Pod", "system-dag-driver", resolved, outputs
    )
    nodes[f"{NAME}-1000000002"] = node(
        f"{NAME}-1000000002", f"{NAME}.root", "DAG", "root", {"parent-dag-id": "4700"}, {}, step_nodes
    )
    nodes[NAME] = node(NAME, NAME, "DAG", "entrypoint", {}, {}, [f"{NAME}-1000000001", f"{NAME}-1000000002"])
    root_task = {"name": "root", "template": "root", "depends": "root-driver.Succeeded"}
    root_task["arguments"] = {
        "parameters": _parameters({"parent-dag-id": "{{tasks.root-driver.outputs.execution-id}}"})
    }
    entrypoint_tasks = [
        {"name": "root-driver", "template": "system-dag-driver", "arguments": {"parameters": _parameters(root_driver)}},
        root_task,
    ]
    templates = system_templates(pipeline, release)
    templates.append({"name": "entrypoint", "dag": {"tasks": entrypoint_tasks}})
    templates.append({"name": "root", "inputs": {"parameters": [{"name": "parent-dag-id"}]}, "dag": {"tasks": tasks}})
    workspace = platform.get("platforms", {}).get("kubernetes", {}).get("pipelineConfig", {}).get("workspace", {})
    pods = [key for key, entry in nodes.items() if entry["type"] == "Pod"]
    labels = {"pipeline/runid": RUN_ID, "workflows.argoproj.io/completed": "true"}
    labels.update({"workflows.argoproj.io/phase": "Succeeded", "pipelines.kubeflow.org/v2_component": "true"})
    document: dict[str, Any] = {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": NAME, "namespace": "team", "labels": labels},
        "spec": {
            "arguments": {"parameters": _parameters(arguments)},
            "entrypoint": "entrypoint",
            "serviceAccountName": "pipeline-runner-dspa",
            "podMetadata": {"labels": {"pipelines.kubeflow.org/v2_component": "true"}},
            "templates": templates,
            "volumeClaimTemplates": [{"metadata": {"name": "kfp-workspace"}, "spec": workspace}],
        },
        "status": {
            "phase": "Succeeded",
            "startedAt": _TIME,
            "finishedAt": _TIME,
            "progress": f"{len(pods)}/{len(pods)}",
            "nodes": nodes,
            "taskResultsCompletionStatus": dict.fromkeys(pods, True),
            "artifactRepositoryRef": {"configMap": "artifact-repositories", "key": "default-v1", "default": True},
            "conditions": [{"type": "PodRunning", "status": "False"}, {"type": "Completed", "status": "True"}],
        },
    }
    document["metadata"]["annotations"] = {"pipelines.kubeflow.org/run_name": f"{pipeline} run"}
    fields = {"f:spec": field_set(document["spec"]), "f:status": field_set(document["status"])}
    manager = {"manager": "workflow-controller", "operation": "Update", "apiVersion": "argoproj.io/v1alpha1"}
    document["metadata"]["managedFields"] = [dict(manager, time=_TIME, fieldsType="FieldsV1", fieldsV1=fields)]
    return document


def field_set(value: Any) -> Any:
    """A ``managedFields`` ``fieldsV1`` set of ``value``: every map key as ``f:<key>``, lists as leaves."""
    if isinstance(value, dict):
        return {f"f:{key}": field_set(inner) for key, inner in value.items()}
    return {}
