"""Every change this project makes to ``kfp`` / ``kfp_server_api`` internals, in one module, for the pinned kfp only.

Each patch is applied explicitly by the code path that needs it, never on import, and first checks that the
installed kfp is :data:`KFP_VERSION` (the internals patched here are that release's; another release fails with one
line naming both versions instead of misbehaving):

* :func:`reproducible_archive` (while a component is built): KFP's archive of the embedded code is compressed with
  xz instead of gzip (about 20 % smaller, measured: ``train_model``'s 460 KB tar is 110.6 KB as gzip and 90.8 KB as xz
  once base64-encoded, which keeps its executor argument under the 112 KiB guard) and without a time stamp, so
  compiled ``pipeline.yaml`` files do not churn; the extraction code KFP writes into the command opens it as xz;
* :func:`allow_default_workspace` (when a task of this project's components is given
  ``dsl.WORKSPACE_PATH_PLACEHOLDER``): a pipeline that declares no workspace compiles with the project's default one;
* :func:`fast_task_setters` (while a pipeline is wired): ``set_cpu_request`` & co. without ``inspect.stack()``;
* :func:`bounded_kfp_requests` (while the CLI talks to the KFP API): a timeout and no urllib3 retries on every request;
* :func:`install_local_optional_artifacts` (local runs: the demo and the tests): ``kfp.local`` leaves unconnected
  optional input artifacts out, as the real backend does;
* :func:`following_local_tasks` (the demo's console): a wrapper around each ``kfp.local`` task.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import lzma
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

#: The kfp release whose internals the patches below replace (``pyproject.toml`` pins the same).
KFP_VERSION = "2.15.2"
_MARKER = "_kfp_finetune_patch"


class KfpVersionError(RuntimeError):
    """The installed kfp is not the release the patches were written for."""


def check_kfp_version(patch: str) -> None:
    """Fails unless the installed kfp is :data:`KFP_VERSION`.

    Args:
        patch: The patch about to be applied, named in the error.

    Raises:
        KfpVersionError: Another kfp is installed (one line naming both versions and the remedy).
    """
    import kfp

    installed = getattr(kfp, "__version__", "unknown")
    if installed != KFP_VERSION:
        raise KfpVersionError(
            f"kfp {installed} is installed, but kfp-finetune's {patch} patch is written for kfp {KFP_VERSION}: "
            f"install kfp=={KFP_VERSION} (pip install 'kfp=={KFP_VERSION}')"
        )


#: KFP 2.15.2's extraction code (``component_factory._generate_shared_extraction_helper``) opens the archive as gzip.
_GZIP_OPEN = "mode='r:gz'"


def _xz_compress(data: bytes, compresslevel: int = 9) -> bytes:
    """The tar archive as xz (no time stamp in the format: byte-stable output); ``compresslevel`` is KFP's, unused."""
    return lzma.compress(data, format=lzma.FORMAT_XZ, preset=9 | lzma.PRESET_EXTREME)


@contextlib.contextmanager
def reproducible_archive() -> Iterator[None]:
    """Within the block, KFP packs a component's embedded code as xz, and its extraction code unpacks xz.

    Both halves change together: the archive KFP base64-encodes into the command is ``lzma``-compressed, and the
    helper source KFP writes in front of the component function opens it with ``mode='r:xz'`` (the standard library's
    ``tarfile`` and ``lzma``, present in every step image: python slim, the PyTorch image, the runtime image).
    """
    check_kfp_version("reproducible_archive")
    from kfp.dsl import component_factory

    original_gzip = component_factory.gzip
    original_helper = component_factory._generate_shared_extraction_helper

    def xz_extraction_helper(*args: Any, **kwargs: Any) -> str:
        source = original_helper(*args, **kwargs)
        if _GZIP_OPEN not in source:
            raise KfpVersionError(f"kfp's embedded-archive extraction code no longer opens it with {_GZIP_OPEN}")
        return source.replace(_GZIP_OPEN, "mode='r:xz'")

    component_factory.gzip = types.SimpleNamespace(compress=_xz_compress)
    component_factory._generate_shared_extraction_helper = xz_extraction_helper
    try:
        yield
    finally:
        component_factory.gzip = original_gzip
        component_factory._generate_shared_extraction_helper = original_helper


def allow_default_workspace(uses_placeholder: Callable[[Any], bool], default_workspace: Callable[[], Any]) -> None:
    """Installs (once, until the process ends) the compile hook of :mod:`components._common.workspace`.

    A pipeline that declares no workspace, but for which ``uses_placeholder(pipeline)`` is true, compiles with
    ``default_workspace()`` (a ``dsl.WorkspaceConfig``) instead of KFP's error; a note goes to stderr.
    """
    from kfp.compiler import pipeline_spec_builder
    from kfp.dsl import graph_component, pipeline_config

    validate = graph_component.GraphComponent._validate_workspace_requirements
    if getattr(validate, _MARKER, False):
        return
    check_kfp_version("allow_default_workspace")
    create = pipeline_spec_builder.create_pipeline_spec

    def validate_or_default(self: Any, pipeline: Any, config: Any) -> None:
        declared = config is not None and config.workspace is not None and getattr(config.workspace, "size", None)
        if not declared and uses_placeholder(pipeline):
            pipeline.kfp_finetune_default_workspace = workspace = default_workspace()
            print(
                f"kfp-finetune: pipeline {pipeline.name!r} passes dsl.WORKSPACE_PATH_PLACEHOLDER to a kfp-finetune "
                f"component but declares no workspace: using a {workspace.size} workspace PVC "
                f"({workspace.kubernetes.pvcSpecPatch}); set dsl.PipelineConfig(workspace=...) to choose",
                file=sys.stderr,
            )
            return
        validate(self, pipeline, config)

    def create_with_default(
        pipeline: Any, component_spec: Any, pipeline_outputs: Any = None, pipeline_config: Any = None
    ) -> Any:
        workspace = getattr(pipeline, "kfp_finetune_default_workspace", None)
        if workspace is not None:
            pipeline_config = pipeline_config or pipeline_config_module.PipelineConfig()
            pipeline_config.workspace = workspace
        return create(pipeline, component_spec, pipeline_outputs=pipeline_outputs, pipeline_config=pipeline_config)

    pipeline_config_module = pipeline_config
    setattr(validate_or_default, _MARKER, True)
    graph_component.GraphComponent._validate_workspace_requirements = validate_or_default
    pipeline_spec_builder.create_pipeline_spec = create_with_default


class _CallerOnlyInspect:
    """``inspect`` for ``kfp.dsl.pipeline_task`` with a ``stack()`` that reads no source."""

    def __getattr__(self, name: str) -> Any:
        return getattr(inspect, name)

    @staticmethod
    def stack(context: int = 1) -> list[tuple[Any, str, int, str, None, None]]:
        """``(frame, filename, lineno, function, None, None)`` from the caller outwards, like ``inspect.stack(0)``."""
        frames, frame = [], sys._getframe(1)
        while frame is not None:
            code = frame.f_code
            frames.append((frame, code.co_filename, frame.f_lineno, code.co_name, None, None))
            frame = frame.f_back
        return frames


@contextlib.contextmanager
def fast_task_setters() -> Iterator[None]:
    """Within the block, KFP's ``set_cpu_request`` & co. are cheap.

    Each of them calls ``inspect.stack()`` only to name itself in an error message; that reads source and searches
    ``sys.modules`` for every frame (~50 ms a call, 18 calls a pipeline: seconds per ``compile --all``).
    """
    check_kfp_version("fast_task_setters")
    from kfp.dsl import pipeline_task

    original = pipeline_task.inspect
    pipeline_task.inspect = _CallerOnlyInspect()
    try:
        yield
    finally:
        pipeline_task.inspect = original


@contextlib.contextmanager
def bounded_kfp_requests(timeout: Any, honoured: Callable[[Any], bool], retries: Any) -> Iterator[None]:
    """Within the block, every ``kfp_server_api`` request has ``timeout`` (unless it carries its own) and ``retries``.

    ``kfp.Client`` builds its own REST client and its methods (upload, list, create...) take no timeout, so the
    timeout is added where every request passes: ``RESTClientObject.request``, for the duration of the block only.

    Args:
        timeout: The ``_request_timeout`` given to requests without one.
        honoured: Whether a request's own ``_request_timeout`` is one ``kfp_server_api`` applies.
        retries: The urllib3 ``Retry`` every pool uses (e.g. a single try).
    """
    check_kfp_version("bounded_kfp_requests")
    from kfp_server_api import rest

    original = rest.RESTClientObject.request

    def request(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if not honoured(kwargs.get("_request_timeout")):
            kwargs["_request_timeout"] = timeout
        pool_options = self.pool_manager.connection_pool_kw
        if pool_options.get("retries") is not retries:
            pool_options["retries"] = retries
            self.pool_manager.clear()
        return original(self, method, url, *args, **kwargs)

    rest.RESTClientObject.request = request
    try:
        yield
    finally:
        rest.RESTClientObject.request = original


def install_local_optional_artifacts() -> None:
    """Makes ``kfp.local`` leave unconnected optional input artifacts out (idempotent; local runs only).

    The real KFP backend runs a task whose optional ``Input[...] = None`` artifact is left unconnected (the function
    gets ``None``); ``kfp.local`` 2.15 instead raises ``KeyError`` while building the executor input, inside a
    pipeline DAG. Never changes compiled YAML.
    """
    from kfp.local import executor_input_utils

    original = executor_input_utils.construct_executor_input
    if getattr(original, _MARKER, False):
        return
    check_kfp_version("install_local_optional_artifacts")

    @functools.wraps(original)
    def construct_executor_input(component_spec: Any, arguments: dict, *args: Any, **kwargs: Any) -> Any:
        artifacts = component_spec.input_definitions.artifacts
        missing = [name for name, spec in artifacts.items() if name not in arguments and spec.is_optional]
        if missing:
            component_spec = type(component_spec).FromString(component_spec.SerializeToString())
            for name in missing:
                del component_spec.input_definitions.artifacts[name]
        return original(component_spec, arguments, *args, **kwargs)

    setattr(construct_executor_input, _MARKER, True)
    executor_input_utils.construct_executor_input = construct_executor_input


@contextlib.contextmanager
def following_local_tasks(wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Iterator[None]:
    """Within the block, every ``kfp.local`` task runs through ``wrap(original runner)`` (the demo's console)."""
    check_kfp_version("following_local_tasks")
    from kfp.local import task_dispatcher

    original = task_dispatcher.run_single_task_implementation
    task_dispatcher.run_single_task_implementation = wrap(original)
    try:
        yield
    finally:
        task_dispatcher.run_single_task_implementation = original
