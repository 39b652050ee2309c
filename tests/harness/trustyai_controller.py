"""An emulated TrustyAI LMEval controller on the Kubernetes emulator: LMEvalJobs run the REAL ``lm_eval``.

As ``lmevaljob_controller.go``: ``New``, ``Running`` (a pod named after the job, with its labels), then ``Complete``
with ``Succeeded`` and ``results`` (lm-eval's JSON as text) or ``Failed``. The pod's command (``generateCmd``) runs as
an offline subprocess, its PVC paths mapped to local directories (``claims``). Scripted: ``results_text`` (lm_eval is
not run), ``never_complete``, ``fail_with``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from tests.harness.kube import KubeApi

GROUP, VERSION, PLURAL = "trustyai.opendatahub.io", "v1alpha1", "lmevaljobs"
POD_ROOT = "/opt/app-root/src"
HF_HOME = f"{POD_ROOT}/hf_home"
TASKS = f"{POD_ROOT}/my_tasks"


def run_lm_eval_cli(arguments: list[str], scratch: Path, timeout: float, commands: list[list[str]]) -> dict[str, Any]:
    """Runs ``python -m lm_eval <arguments>`` offline in ``scratch`` (recorded in ``commands``); its results JSON."""
    output = scratch / "output"
    command = [sys.executable, "-m", "lm_eval", "--output_path", str(output), *arguments]
    commands.append(command)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run(command, cwd=scratch, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode:
        raise RuntimeError(f"lm_eval exited {done.returncode}: {done.stderr[-300:]}")
    found = sorted(output.rglob("results_*.json"))
    if not found:
        raise RuntimeError(f"lm_eval wrote no results under {output}")
    return json.loads(found[-1].read_text())


def step_pod(name: str, namespace: str, claim: str, workspace: Path) -> dict[str, Any]:
    """The lm_eval step's own pod: the workspace PVC ``claim`` mounted at ``workspace`` (what ``pvc_path`` names)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [{"name": "main", "volumeMounts": [{"name": "ws", "mountPath": str(workspace)}]}],
            "volumes": [{"name": "ws", "persistentVolumeClaim": {"claimName": claim}}],
        },
        "status": {"phase": "Running"},
    }


class TrustyAIController:
    """Reconciles the emulator's LMEvalJobs on a thread until :meth:`stop`; ``claims``: local directory by PVC name;
    ``timeout``: seconds one lm_eval run may take."""

    def __init__(self, kube: KubeApi, claims: dict[str, Path], timeout: float = 600.0) -> None:
        self.kube, self.claims, self.timeout = kube, claims, timeout
        self.results_text: str | None = None
        self.never_complete = False
        self.fail_with = ""
        self.commands: list[list[str]] = []
        self._seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="trustyai-controller", daemon=True)

    def __enter__(self) -> TrustyAIController:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        """Stops reconciling (a running lm_eval finishes first)."""
        self._stop.set()
        self._thread.join(timeout=self.timeout)

    def _loop(self) -> None:
        while not self._stop.wait(0.05):
            for job in self.kube.objects(PLURAL):
                uid = (job.get("metadata") or {}).get("uid") or job["metadata"]["name"]
                if uid not in self._seen:
                    self._seen.add(uid)
                    self._reconcile(job)

    def _status(self, job: dict[str, Any], status: dict[str, Any]) -> None:
        self.kube.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, job["metadata"]["namespace"], PLURAL, job["metadata"]["name"], {"status": status}
        )

    def _reconcile(self, job: dict[str, Any]) -> None:
        name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
        self._status(job, {"state": "New", "reason": "NoReason", "message": "job created"})
        pod_labels = {"app.kubernetes.io/name": "ta-lmes", **(job["metadata"].get("labels") or {})}
        self.kube.put_pod(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace, "labels": pod_labels},
                "spec": {"containers": [{"name": "main", "image": "ta-lmes-job"}]},
                "status": {"phase": "Running"},
            }
        )
        self._status(job, {"state": "Running", "reason": "NoReason", "message": "job is running", "podName": name})
        if self.never_complete:
            return
        if self.fail_with:
            self._status(job, {"state": "Complete", "reason": "Failed", "message": self.fail_with})
            return
        try:  # scripted results stand for whatever lm_eval would have written: it is not run
            text = self.results_text if self.results_text is not None else self._run_lm_eval(job)
        except Exception as error:  # noqa: BLE001 - reported as the controller would
            self._status(job, {"state": "Complete", "reason": "Failed", "message": str(error)[-400:]})
            return
        self._status(job, {"state": "Complete", "reason": "Succeeded", "message": "job completed", "results": text})

    def _run_lm_eval(self, job: dict[str, Any]) -> str:
        """Runs lm_eval as the job's pod would; returns the results JSON text."""
        spec = job["spec"]
        with tempfile.TemporaryDirectory(prefix="lmes-pod-") as root_dir:
            root = Path(root_dir)
            claim = spec["offline"]["storage"]["pvcName"]
            os.symlink(self.claims[claim], root / "hf_home")
            (root / "my_tasks").mkdir()
            self._mount_tasks(spec.get("pod") or {}, root)
            local = lambda value: str(value).replace(POD_ROOT, str(root))  # noqa: E731 - the mount's path mapping
            args = ",".join(f"{a['name']}={local(a.get('value', ''))}" for a in spec.get("modelArgs") or [])
            command = ["--model", spec["model"], *(["--model_args", args] if args else [])]
            command += ["--tasks", ",".join(spec["taskList"]["taskNames"]), "--include_path", str(root / "my_tasks")]
            if "numFewShot" in spec:
                command += ["--num_fewshot", str(spec["numFewShot"])]
            if spec.get("limit"):
                command += ["--limit", spec["limit"]]
            if spec.get("genArgs"):
                command += ["--gen_kwargs", ",".join(f"{a['name']}={a['value']}" for a in spec["genArgs"])]
            if spec.get("logSamples"):
                command.append("--log_samples")
            command += ["--batch_size", spec.get("batchSize") or "1"]
            if (spec.get("chatTemplate") or {}).get("enabled"):
                command.append("--apply_chat_template")
            return json.dumps(run_lm_eval_cli(command, root, self.timeout, self.commands))

    def _mount_tasks(self, pod: dict[str, Any], root: Path) -> None:
        """Copies what the pod mounts at :data:`TASKS` into the emulated root, the pod's paths pointed there."""
        volumes = {v["name"]: v for v in pod.get("volumes") or []}
        for mount in (pod.get("container") or {}).get("volumeMounts") or []:
            claim = (volumes.get(mount["name"]) or {}).get("persistentVolumeClaim", {}).get("claimName")
            if mount.get("mountPath") != TASKS or claim not in self.claims:
                continue
            source = self.claims[claim] / mount.get("subPath", "")
            target = root / "my_tasks"
            shutil.copytree(source, target, dirs_exist_ok=True)
            for yaml_file in target.glob("*.yaml"):
                yaml_file.write_text(yaml_file.read_text().replace(POD_ROOT, str(root)))
