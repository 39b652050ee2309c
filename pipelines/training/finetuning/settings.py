"""Compile-time settings of the fine-tuning pipelines.

They shape the compiled YAML itself (the workspace PVC, secret names, images) and so cannot be run-time parameters.
Each is a module constant overridable by an environment variable (``KFP_FINETUNE_<NAME>``) and by the matching
``kfp-finetune compile`` flag.
"""

from __future__ import annotations

import dataclasses
import os
import re

_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_ACCESS_MODES = {"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"}

PVC_SIZE = "50Gi"
PVC_STORAGE_CLASS = "nfs-csi"
PVC_ACCESS_MODES = ("ReadWriteMany",)
#: Secret names (RHOAI conventions). The pipeline mounts them as env vars; optional ones may be absent.
KUBERNETES_CREDENTIALS_SECRET = "kubernetes-credentials"
S3_SECRET = "s3-secret"
HF_TOKEN_SECRET = "hf-token"
OCI_PULL_SECRET = "oci-pull-secret-model-download"


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
    """

    pvc_size: str = PVC_SIZE
    pvc_storage_class: str = PVC_STORAGE_CLASS
    pvc_access_modes: tuple[str, ...] = PVC_ACCESS_MODES
    pipeline_name: str = ""
    kubernetes_credentials_secret: str = KUBERNETES_CREDENTIALS_SECRET
    s3_secret: str = S3_SECRET
    hf_token_secret: str = HF_TOKEN_SECRET
    oci_pull_secret: str = OCI_PULL_SECRET

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

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **overrides: object) -> CompileSettings:
        """Reads ``KFP_FINETUNE_<FIELD>`` variables (access modes comma-separated), then applies ``overrides``.

        Args:
            environ: The environment to read (default ``os.environ``).
            **overrides: Field values that win over the environment (``None`` values are ignored).

        Returns:
            The validated settings.
        """
        environ = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for field in dataclasses.fields(cls):
            raw = environ.get(f"KFP_FINETUNE_{field.name.upper()}")
            if raw is not None:
                values[field.name] = (
                    tuple(m.strip() for m in raw.split(",") if m.strip()) if "modes" in field.name else raw
                )
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
