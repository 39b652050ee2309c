"""Compile-time settings of the fine-tuning pipelines.

They shape the compiled YAML itself (the workspace PVC, secret names, images) and so cannot be run-time parameters.
Each is a module constant overridable by an environment variable (``KFP_FINETUNE_<NAME>``) and by the matching
``kfp-finetune compile`` flag.
"""

from __future__ import annotations

import dataclasses
import os
import re

from components._common.workspace import PVC_ACCESS_MODES, PVC_SIZE, PVC_STORAGE_CLASS

_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_ACCESS_MODES = {"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"}

#: Secret names (RHOAI conventions). The pipeline mounts them as env vars; optional ones may be absent.
KUBERNETES_CREDENTIALS_SECRET = "kubernetes-credentials"
S3_SECRET = "s3-secret"
HF_TOKEN_SECRET = "hf-token"
OCI_PULL_SECRET = "oci-pull-secret-model-download"
#: The evaluation step's accelerator: the guide's evaluation "needs ~1 GPU" on nodes labelled
#: ``nvidia.com/gpu.present=true``. ``EVAL_GPUS = 0`` compiles a CPU-only evaluation step (no request, no selector).
EVAL_GPUS = 1
EVAL_GPU_RESOURCE = "nvidia.com/gpu"
EVAL_NODE_SELECTOR = "nvidia.com/gpu.present=true"


@dataclasses.dataclass(frozen=True)
class CompileSettings:
    """Settings that are fixed when a pipeline is compiled.

    Attributes:
        pvc_size: Size of the run's workspace PVC (a Kubernetes quantity, e.g. ``50Gi``).
        pvc_storage_class: Storage class of the workspace PVC ("" = the cluster default).
        pvc_access_modes: Access modes of the workspace PVC; training pods on several nodes need ``ReadWriteMany``.
        pipeline_name: Name of the compiled pipeline ("" = the pipeline's own name, e.g. ``sft-minimal``).
        kubernetes_credentials_secret: Secret with ``KUBERNETES_SERVER_URL`` / ``KUBERNETES_AUTH_TOKEN`` (optional;
            the task's service account is used when absent).
        s3_secret: Data-connection secret with the ``AWS_*`` keys (optional).
        hf_token_secret: Secret with ``HF_TOKEN`` (optional; needed for gated models and private datasets).
        oci_pull_secret: Secret with a Docker config.json for ``oci://`` base models (optional): key
            ``OCI_PULL_SECRET_MODEL_DOWNLOAD`` (the guide's) or ``.dockerconfigjson`` (a docker-registry secret).
        eval_gpus: Accelerators requested by the evaluation step (0 = CPU only: no request, no node selector).
        eval_gpu_resource: Extended resource name of the evaluation step's accelerator.
        eval_node_selector: ``key=value`` node selector of the evaluation step when it requests accelerators
            ("" = none).
    """

    pvc_size: str = PVC_SIZE
    pvc_storage_class: str = PVC_STORAGE_CLASS
    pvc_access_modes: tuple[str, ...] = PVC_ACCESS_MODES
    pipeline_name: str = ""
    kubernetes_credentials_secret: str = KUBERNETES_CREDENTIALS_SECRET
    s3_secret: str = S3_SECRET
    hf_token_secret: str = HF_TOKEN_SECRET
    oci_pull_secret: str = OCI_PULL_SECRET
    eval_gpus: int = EVAL_GPUS
    eval_gpu_resource: str = EVAL_GPU_RESOURCE
    eval_node_selector: str = EVAL_NODE_SELECTOR

    def __post_init__(self) -> None:
        """Validates the settings, naming the offending setting and value."""
        if not _QUANTITY.match(self.pvc_size):
            raise ValueError(f"pvc_size must be a Kubernetes quantity such as '50Gi', got {self.pvc_size!r}")
        unknown = [mode for mode in self.pvc_access_modes if mode not in _ACCESS_MODES]
        if not self.pvc_access_modes or unknown:
            raise ValueError(
                f"pvc_access_modes must be a non-empty subset of {sorted(_ACCESS_MODES)}, "
                f"got {list(self.pvc_access_modes)}"
            )
        for field in ("kubernetes_credentials_secret", "s3_secret", "hf_token_secret", "oci_pull_secret"):
            if not getattr(self, field):
                raise ValueError(f"{field} must name a Kubernetes secret, got an empty string")
        if isinstance(self.eval_gpus, bool) or not isinstance(self.eval_gpus, int) or self.eval_gpus < 0:
            raise ValueError(f"eval_gpus must be an integer >= 0, got {self.eval_gpus!r}")
        if self.eval_gpus and not self.eval_gpu_resource:
            raise ValueError("eval_gpu_resource must name an extended resource (e.g. nvidia.com/gpu), got ''")
        if self.eval_node_selector and "=" not in self.eval_node_selector:
            raise ValueError(
                "eval_node_selector must be 'key=value' (e.g. nvidia.com/gpu.present=true), "
                f"got {self.eval_node_selector!r}"
            )

    @property
    def eval_node_selector_pair(self) -> tuple[str, str] | None:
        """The evaluation step's node selector as ``(key, value)``, or None."""
        if not self.eval_gpus or not self.eval_node_selector:
            return None
        key, value = self.eval_node_selector.split("=", 1)
        return key.strip(), value.strip()

    @classmethod
    def from_env(
        cls, environ: dict[str, str] | None = None, base: dict[str, object] | None = None, **overrides: object
    ) -> CompileSettings:
        """``base`` (a ``pipeline.py``'s constants), then ``KFP_FINETUNE_<FIELD>`` variables, then ``overrides``.

        Args:
            environ: The environment to read (default ``os.environ``); access modes are comma-separated.
            base: Field values that replace the built-in defaults (see :func:`constants_of`).
            **overrides: Field values that win over the environment (``None`` values are ignored).

        Returns:
            The validated settings.

        Raises:
            ValueError: A value breaks a rule; the message names the setting (and the variable it came from).
        """
        environ = os.environ if environ is None else environ
        values: dict[str, object] = dict(base or {})
        for field in dataclasses.fields(cls):
            variable = f"KFP_FINETUNE_{field.name.upper()}"
            raw = environ.get(variable)
            if raw is None:
                continue
            if "modes" in field.name:
                values[field.name] = tuple(m.strip() for m in raw.split(",") if m.strip())
            elif field.type == "int":
                try:
                    values[field.name] = int(raw)
                except ValueError:
                    raise ValueError(f"{variable}={raw!r}: {field.name} must be an integer") from None
            else:
                values[field.name] = raw
        values.update({key: value for key, value in overrides.items() if value is not None})
        if "pvc_access_modes" in values:
            values["pvc_access_modes"] = tuple(values["pvc_access_modes"])
        return cls(**values)

    def workspace_pvc_patch(self) -> dict:
        """The ``pvcSpecPatch`` applied to the run's workspace PVC."""
        patch: dict = {"accessModes": list(self.pvc_access_modes)}
        if self.pvc_storage_class:
            patch["storageClassName"] = self.pvc_storage_class
        return patch


def constants_of(namespace: dict[str, object]) -> dict[str, object]:
    """The compile-time constants a ``pipeline.py`` declares at its top (``PVC_SIZE`` -> ``pvc_size``, ...).

    Args:
        namespace: The module's ``globals()``.

    Returns:
        The :class:`CompileSettings` fields whose upper-case names the module defines.
    """
    fields = {field.name for field in dataclasses.fields(CompileSettings)}
    return {name.lower(): value for name, value in namespace.items() if name.isupper() and name.lower() in fields}
