"""Compile-time settings of the fine-tuning pipelines: what shapes the YAML itself (PVC, secrets, images, resources).

A ``pipeline.py`` passes its constants to :func:`pipeline_settings`; ``KFP_FINETUNE_<NAME>`` environment variables and
``kfp-finetune compile`` flags override them.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import os
import re
from collections.abc import Iterator, Mapping

from components._common.images import STEP_IMAGE, STEP_IMAGE_CUDA
from components._common.workspace import PVC_ACCESS_MODES, PVC_SIZE, PVC_STORAGE_CLASS

#: What KFP accepts for a task's CPU and memory, with an example for the error message.
_QUANTITIES = {
    "cpu": (re.compile(r"^([0-9]*\.)?[0-9]+m?$"), "'500m' or '2'"),
    "memory": (re.compile(r"^[0-9]+(E|Ei|P|Pi|T|Ti|G|Gi|M|Mi|K|Ki)?$"), "'512Mi' or '16Gi'"),
}
_ACCESS_MODES = {"ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"}
_SECRETS = ("kubernetes_credentials_secret", "s3_secret", "hf_token_secret", "oci_pull_secret")
#: The steps with their own resources, in pipeline order.
STEPS = ("dataset", "launcher", "eval", "registry")
_RESOURCE_KINDS = ("cpu_request", "cpu_limit", "memory_request", "memory_limit")


@dataclasses.dataclass(frozen=True)
class CompileSettings:
    """Settings that are fixed when a pipeline is compiled.

    Attributes:
        pvc_size: Size of the run's workspace PVC (a Kubernetes quantity, e.g. ``50Gi``).
        pvc_storage_class: Storage class of the workspace PVC ("" = the cluster default).
        pvc_access_modes: Access modes of the workspace PVC; training pods on several nodes need ``ReadWriteMany``.
        pipeline_name: Name of the compiled pipeline ("" = the pipeline's own name, e.g. ``sft-minimal``).
        kubernetes_credentials_secret: Optional secret with ``KUBERNETES_SERVER_URL`` / ``KUBERNETES_AUTH_TOKEN``
            (absent: the task's service account).
        s3_secret: Optional data-connection secret with the ``AWS_*`` keys.
        hf_token_secret: Optional secret with ``HF_TOKEN`` (gated models, private datasets).
        oci_pull_secret: Optional secret with a Docker config.json for ``oci://`` base models
            (``OCI_PULL_SECRET_MODEL_DOWNLOAD`` or ``.dockerconfigjson``).
        eval_gpus: Accelerators requested by the evaluation step (0 = CPU only: no request, no node selector).
        eval_gpu_resource: Extended resource name of the evaluation step's accelerator.
        eval_node_selector: ``key=value`` node selector of the evaluation step when it requests accelerators.
        image: Image of every step (a ``Containerfile`` build); "" = the published ``STEP_IMAGE``.
        eval_image: Image of the evaluation step; "" = ``image``, else ``STEP_IMAGE_CUDA`` (``STEP_IMAGE`` on CPU).
        <step>_cpu_request, <step>_cpu_limit, <step>_memory_request, <step>_memory_limit: Kubernetes quantities
            of each step's container (``step`` one of :data:`STEPS`); limits must not be below requests.
    """

    pvc_size: str = PVC_SIZE
    pvc_storage_class: str = PVC_STORAGE_CLASS
    pvc_access_modes: tuple[str, ...] = PVC_ACCESS_MODES
    pipeline_name: str = ""
    kubernetes_credentials_secret: str = "kubernetes-credentials"
    s3_secret: str = "s3-secret"
    hf_token_secret: str = "hf-token"
    oci_pull_secret: str = "oci-pull-secret-model-download"
    # The guide's evaluation "needs ~1 GPU" on nodes labelled nvidia.com/gpu.present=true.
    eval_gpus: int = 1
    eval_gpu_resource: str = "nvidia.com/gpu"
    eval_node_selector: str = "nvidia.com/gpu.present=true"
    image: str = ""
    eval_image: str = ""
    # The dataset step holds a tokenizer and a dataset; the launcher calls the API; the evaluation loads the model
    # (a 1.5B model is ~3 GB in bf16) next to lm-eval; the registry step makes a few API calls.
    dataset_cpu_request: str = "1"
    dataset_cpu_limit: str = "4"
    dataset_memory_request: str = "4Gi"
    dataset_memory_limit: str = "16Gi"
    launcher_cpu_request: str = "250m"
    launcher_cpu_limit: str = "1"
    launcher_memory_request: str = "512Mi"
    launcher_memory_limit: str = "2Gi"
    eval_cpu_request: str = "2"
    eval_cpu_limit: str = "8"
    eval_memory_request: str = "16Gi"
    eval_memory_limit: str = "48Gi"
    registry_cpu_request: str = "250m"
    registry_cpu_limit: str = "1"
    registry_memory_request: str = "512Mi"
    registry_memory_limit: str = "2Gi"

    def __post_init__(self) -> None:
        """Validates the settings, naming the offending setting and value."""
        from kubernetes.utils import parse_quantity

        try:  # a positive Kubernetes quantity
            size_ok = self.pvc_size == self.pvc_size.strip() and parse_quantity(self.pvc_size) > 0
        except (ValueError, TypeError, ArithmeticError, AttributeError):
            size_ok = False
        if not size_ok:
            raise ValueError(f"pvc_size must be a Kubernetes quantity such as '50Gi', got {self.pvc_size!r}")
        if not self.pvc_access_modes or set(self.pvc_access_modes) - _ACCESS_MODES:
            raise ValueError(
                f"pvc_access_modes must be a non-empty subset of {sorted(_ACCESS_MODES)}, "
                f"got {list(self.pvc_access_modes)}"
            )
        for field in _SECRETS:
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
        for field in ("image", "eval_image"):
            value = getattr(self, field)
            if not isinstance(value, str) or value != value.strip() or any(c.isspace() for c in value):
                raise ValueError(f"{field} must be a container image reference without spaces (or ''), got {value!r}")
        for step in STEPS:
            self._check_resources(step)

    def _check_resources(self, step: str) -> None:
        """``step``'s quantities are KFP's, and no limit is below its request."""
        from kubernetes.utils import parse_quantity

        for resource, (pattern, example) in _QUANTITIES.items():
            request, limit = (f"{step}_{resource}_{kind}" for kind in ("request", "limit"))
            for field in (request, limit):
                value = getattr(self, field)
                if not isinstance(value, str) or not pattern.match(value):
                    raise ValueError(f"{field} must be a Kubernetes quantity such as {example}, got {value!r}")
            if parse_quantity(getattr(self, limit)) < parse_quantity(getattr(self, request)):
                raise ValueError(
                    f"{limit} ({getattr(self, limit)}) must not be below {request} ({getattr(self, request)})"
                )

    def image_of(self, step: str) -> str:
        """The image ``step`` (one of :data:`STEPS`, else ``ValueError``) runs on."""
        if step not in STEPS:
            raise ValueError(f"unknown step {step!r}: one of {list(STEPS)}")
        if step != "eval":
            return self.image or STEP_IMAGE
        return self.eval_image or self.image or (STEP_IMAGE_CUDA if self.eval_gpus else STEP_IMAGE)

    def resources_of(self, step: str) -> dict[str, str]:
        """``{"cpu_request": ..., "cpu_limit": ..., "memory_request": ..., "memory_limit": ...}`` of ``step``."""
        return {kind: getattr(self, f"{step}_{kind}") for kind in _RESOURCE_KINDS}

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, base: dict[str, object] | None = None, **overrides: object
    ) -> CompileSettings:
        """``base`` (a ``pipeline.py``'s constants), then ``KFP_FINETUNE_<FIELD>`` variables, then ``overrides``.

        Args:
            environ: The environment to read (default ``os.environ``).
            base: Field values that replace the built-in defaults.
            **overrides: Field values that win over the environment (``None`` ignored); access modes as a string
                are comma-separated.

        Raises:
            ValueError: A value breaks a rule; the message names the setting (and the variable it came from).
        """
        environ = os.environ if environ is None else environ
        values: dict[str, object] = dict(base or {})
        for field in dataclasses.fields(cls):
            variable = f"KFP_FINETUNE_{field.name.upper()}"
            raw = environ.get(variable)
            if raw is not None and field.type == "int":
                try:
                    values[field.name] = int(raw)
                except ValueError:
                    raise ValueError(f"{variable}={raw!r}: {field.name} must be an integer") from None
            elif raw is not None:
                values[field.name] = raw
        values.update({key: value for key, value in overrides.items() if value is not None})
        modes = values.get("pvc_access_modes")
        if isinstance(modes, str):
            values["pvc_access_modes"] = tuple(mode.strip() for mode in modes.split(",") if mode.strip())
        elif modes is not None:
            values["pvc_access_modes"] = tuple(modes)
        return cls(**values)

    def workspace_pvc_patch(self) -> dict:
        """The ``pvcSpecPatch`` applied to the run's workspace PVC."""
        patch: dict = {"accessModes": list(self.pvc_access_modes)}
        if self.pvc_storage_class:
            patch["storageClassName"] = self.pvc_storage_class
        return patch


#: Settings ``kfp-finetune compile`` applies on top of a pipeline.py's constants (see :func:`compile_overrides`).
_OVERRIDES: contextvars.ContextVar[CompileSettings | Mapping[str, object]] = contextvars.ContextVar(
    "kfp_finetune_compile_overrides", default={}
)


@contextlib.contextmanager
def compile_overrides(settings: CompileSettings | Mapping[str, object] | None) -> Iterator[None]:
    """Makes :func:`pipeline_settings` return ``settings`` while a pipeline module is executed.

    ``settings``: complete settings (they replace the module's constants), or single fields' overrides (compile
    flags; ``None`` ignored) applied after the ``KFP_FINETUNE_*`` variables.
    """
    token = _OVERRIDES.set(settings if settings is not None else {})
    try:
        yield
    finally:
        _OVERRIDES.reset(token)


def pipeline_settings(
    pvc_size: str | None = None,
    pvc_storage_class: str | None = None,
    pvc_access_modes: list[str] | None = None,
    pipeline_name: str | None = None,
    image: str | None = None,
    eval_image: str | None = None,
    **constants: object,
) -> CompileSettings:
    """The settings a ``pipeline.py`` compiles with: its constants, then ``KFP_FINETUNE_*``, then compile flags.

    The positional arguments are the module's ``PVC_SIZE``, ``PVC_STORAGE_CLASS``, ``PVC_ACCESS_MODES``,
    ``PIPELINE_NAME``, ``IMAGE`` and ``EVAL_IMAGE``; ``constants`` any other :class:`CompileSettings` field.

    Raises:
        ValueError: A value breaks a rule, or a name is no setting; the message names it (and its variable).
    """
    named = dict(pvc_size=pvc_size, pvc_storage_class=pvc_storage_class, pvc_access_modes=pvc_access_modes)
    named.update(pipeline_name=pipeline_name, image=image, eval_image=eval_image)
    constants.update({name: value for name, value in named.items() if value is not None})
    fields = {field.name for field in dataclasses.fields(CompileSettings)}
    unknown = sorted(set(constants) - fields)
    if unknown:
        raise ValueError(f"pipeline_settings({unknown[0]}=...): no such compile-time setting; one of {sorted(fields)}")
    active = _OVERRIDES.get()
    settings = active if isinstance(active, CompileSettings) else CompileSettings.from_env(base=constants, **active)
    if not settings.pipeline_name:
        settings = dataclasses.replace(settings, pipeline_name=str(constants.get("pipeline_name", "")))
    return settings
