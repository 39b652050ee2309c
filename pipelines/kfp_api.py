"""Upload, run and schedule compiled pipelines on a Kubeflow Pipelines API (v2beta1) through ``kfp.Client``.

The ``kfp-finetune upload|run|schedule`` commands are thin argparse wrappers of this module:

* :func:`connection_from_options` turns flags and environment (``KFP_HOST``, ``KFP_TOKEN``) into a
  :class:`Connection`; :func:`make_client` builds the real ``kfp.Client`` from it.
* :func:`load_arguments` merges ``--param KEY=VALUE`` flags over a YAML/JSON parameters file.
* :func:`upload_pipeline`, :func:`create_run` and :func:`schedule_run` do the work and return the new ids.

Bad input is refused before any request is sent (:class:`ValueError` naming the rule, the value and where it came
from); a refusal by the API server becomes a :class:`KfpApiError`. The bearer token is never printed, logged or put
in an error message.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import logging
import math
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping
from urllib.parse import urlsplit

import yaml

if TYPE_CHECKING:
    import kfp

LOGGER = logging.getLogger(__name__)

HOST_ENV = "KFP_HOST"
TOKEN_ENV = "KFP_TOKEN"
DEFAULT_EXPERIMENT = "Default"
MAX_CONCURRENCY_RANGE = (1, 10)  # what the KFP API server accepts for a recurring run
PACKAGE_SUFFIXES = (".yaml", ".yml")
HEALTH_TIMEOUT_SECONDS = 30.0
HEALTH_ACTION = "check health (GET /apis/v2beta1/healthz)"
_ERROR_TEXT_MAX = 500


class KfpApiError(RuntimeError):
    """The KFP API could not be reached, or refused a request."""


# --------------------------------------------------------------------------------------------- connection
@dataclass(frozen=True, repr=False)
class Connection:
    """Where the KFP API is and how to authenticate to it.

    Attributes:
        host: The KFP API URL, e.g. the Data Science Pipelines route ``https://ds-pipeline-dspa-<ns>.apps.<cluster>``.
        token: The bearer token (e.g. from ``oc whoami -t``); empty for none. Never shown by ``repr``.
        verify_ssl: Whether the server's TLS certificate is verified.
        ca_bundle: A PEM file of CA certificates to verify the server with; empty for the system ones.
        namespace: The Kubernetes namespace for multi-user deployments; empty for the server's default.
    """

    host: str
    token: str = ""
    verify_ssl: bool = True
    ca_bundle: str = ""
    namespace: str = ""

    def __repr__(self) -> str:
        """The connection with the token hidden."""
        token = "<hidden>" if self.token else "<none>"
        return (
            f"Connection(host={self.host!r}, token={token}, verify_ssl={self.verify_ssl}, "
            f"ca_bundle={self.ca_bundle!r}, namespace={self.namespace!r})"
        )

    __str__ = __repr__


def connection_from_options(
    host: str = "",
    token_file: str = "",
    insecure_skip_tls_verify: bool = False,
    ca_bundle: str = "",
    namespace: str = "",
    environ: Mapping[str, str] | None = None,
) -> Connection:
    """Builds a :class:`Connection` from command-line options and the environment.

    Args:
        host: The KFP API URL (``--host``); when empty, ``KFP_HOST`` from the environment.
        token_file: A file holding the bearer token (``--token-file``, e.g. written by ``oc whoami -t > F``); it
            wins over ``KFP_TOKEN`` from the environment. No token at all is allowed (unauthenticated API).
        insecure_skip_tls_verify: Do not verify the server's TLS certificate (``--insecure-skip-tls-verify``).
        ca_bundle: A PEM file of CA certificates to verify the server with (``--ca-bundle``).
        namespace: The Kubernetes namespace for multi-user deployments (``--namespace``).
        environ: The environment to read ``KFP_HOST`` / ``KFP_TOKEN`` from; ``os.environ`` when None.

    Returns:
        The connection (``repr`` hides the token).

    Raises:
        ValueError: No host, a host that is not an http(s) URL, an unreadable or empty token file, a missing CA
            bundle, or both TLS options at once.
    """
    environ = os.environ if environ is None else environ
    host, host_source = (host.strip(), "--host") if host.strip() else (environ.get(HOST_ENV, "").strip(), HOST_ENV)
    if not host:
        raise ValueError(
            f"no KFP API host: pass --host URL or set {HOST_ENV} (on OpenShift AI: the Data Science Pipelines "
            "route, e.g. https://ds-pipeline-dspa-<namespace>.apps.<cluster>)"
        )
    url = urlsplit(host)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise ValueError(f"KFP host {host!r} (from {host_source}) must be an http:// or https:// URL")
    if insecure_skip_tls_verify and ca_bundle:
        raise ValueError("--insecure-skip-tls-verify and --ca-bundle contradict each other: pass one of them")
    if ca_bundle and not Path(ca_bundle).is_file():
        raise ValueError(f"CA bundle {ca_bundle!r} (--ca-bundle) is not a readable file")
    token = _read_token_file(token_file) if token_file else environ.get(TOKEN_ENV, "").strip()
    if token and url.scheme == "http":
        LOGGER.warning("the bearer token is sent unencrypted to %s: use https:// outside a local test", host)
    return Connection(
        host=host.rstrip("/"),
        token=token,
        verify_ssl=not insecure_skip_tls_verify,
        ca_bundle=str(Path(ca_bundle).resolve()) if ca_bundle else "",
        namespace=namespace.strip(),
    )


def _read_token_file(token_file: str) -> str:
    """The token in ``token_file`` (surrounding whitespace removed); the errors never quote its content."""
    try:
        token = Path(token_file).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise ValueError(f"cannot read the bearer token file {token_file!r} (--token-file): {reason}") from None
    if not token:
        raise ValueError(f"the bearer token file {token_file!r} (--token-file) is empty: write it with `oc whoami -t`")
    if any(character.isspace() for character in token):
        raise ValueError(
            f"the bearer token file {token_file!r} (--token-file) holds more than one word: it must hold only the "
            "token, as `oc whoami -t` prints it"
        )
    return token


def make_client(connection: Connection) -> kfp.Client:
    """Builds the real ``kfp.Client`` for a connection, after one health check of the API.

    ``kfp.Client`` checks ``GET /apis/v2beta1/healthz`` itself but retries a failure for 25 s and takes an HTML page
    (a dashboard or login page at the wrong URL) for a healthy answer; :func:`check_health` fails fast on both.

    Args:
        connection: Host, bearer token, TLS settings and namespace.

    Returns:
        The client; its configuration carries the token as ``Authorization: Bearer ...`` and the TLS settings.

    Raises:
        KfpApiError: The API cannot be reached (connection or TLS failure) or does not answer as a KFP API.
    """
    import kfp

    check_health(connection)
    with warnings.catch_warnings():
        # kfp.Client warns on every construction that it needs a KFP >= 2.0.0-beta.2 server: noise for a CLI.
        warnings.filterwarnings("ignore", message="This client only works", category=FutureWarning)
        with api_errors(connection, "connect (GET /apis/v2beta1/healthz)"):
            return kfp.Client(
                host=connection.host,
                existing_token=connection.token or None,
                namespace=connection.namespace or "kubeflow",  # kfp.Client's default, which means "none given"
                ssl_ca_cert=connection.ca_bundle or None,
                verify_ssl=connection.verify_ssl,
            )


def check_health(connection: Connection, timeout_seconds: float | tuple[int, int] = HEALTH_TIMEOUT_SECONDS) -> dict:
    """Calls ``GET /apis/v2beta1/healthz`` once, with the connection's TLS settings and token.

    Args:
        connection: Host, bearer token and TLS settings.
        timeout_seconds: How long to wait for the answer: seconds in total, or ``(connect, read)`` seconds
            (``kfp_server_api`` ignores a float, so one is rounded up to whole seconds).

    Returns:
        The health answer (e.g. ``{"multi_user": false}``).

    Raises:
        KfpApiError: Unreachable, refused, or an answer that is not a JSON object (not a KFP API).
    """
    import kfp_server_api

    configuration = kfp_server_api.Configuration(host=connection.host)
    configuration.verify_ssl = connection.verify_ssl
    configuration.ssl_ca_cert = connection.ca_bundle or None
    if connection.token:
        configuration.api_key["authorization"] = connection.token
        configuration.api_key_prefix["authorization"] = "Bearer"
    action = HEALTH_ACTION
    with kfp_server_api.ApiClient(configuration) as api_client, api_errors(connection, action):
        healthz = kfp_server_api.HealthzServiceApi(api_client)
        timeout = timeout_seconds if isinstance(timeout_seconds, tuple) else math.ceil(timeout_seconds)
        response = healthz.healthz_service_get_healthz(_preload_content=False, _request_timeout=timeout)
    with contextlib.suppress(ValueError):
        answer = json.loads(response.data)
        if isinstance(answer, dict):
            return answer
    content_type = response.headers.get("Content-Type", "unknown")
    raise KfpApiError(
        f"KFP API at {connection.host}: {action} answered {content_type}, not a KFP health report: check that --host "
        "is the pipelines API route (ds-pipeline-...), not the dashboard, and that the token is accepted"
    )


@contextlib.contextmanager
def api_errors(connection: Connection, action: str) -> Iterator[None]:
    """Turns failures of a KFP API call into a :class:`KfpApiError` that says what failed and what to do.

    Args:
        connection: The connection used (its host is named; its token is redacted from every message).
        action: What was being done, e.g. ``"upload pipeline 'x'"``.

    Raises:
        KfpApiError: In place of ``kfp_server_api.ApiException``, urllib3 connection errors and kfp's healthz
            ``TimeoutError``.
    """
    import kfp_server_api
    import urllib3

    try:
        yield
    except kfp_server_api.ApiException as error:
        message = _server_message(error.body) or error.reason or ""
        hint = _STATUS_HINTS.get(error.status, "")
        if error.status == 404 and action != HEALTH_ACTION:
            hint = ""  # a missing resource, not a wrong host
        text = f"KFP API at {connection.host}: {action} failed: HTTP {error.status} {error.reason}: {message}{hint}"
        raise KfpApiError(_redact(text, connection.token)) from None
    except urllib3.exceptions.HTTPError as error:
        reason = getattr(error, "reason", None) or error
        hint = ""
        if isinstance(reason, urllib3.exceptions.SSLError) or "CERTIFICATE" in str(reason).upper():
            hint = "; to trust the server's certificate pass --ca-bundle FILE (or --insecure-skip-tls-verify)"
        text = f"cannot reach the KFP API at {connection.host} to {action}: {reason}{hint}"
        raise KfpApiError(_redact(text, connection.token)) from None
    except TimeoutError as error:
        text = f"the KFP API at {connection.host} is not healthy ({action}): {error}; check --host"
        raise KfpApiError(_redact(text, connection.token)) from None


_STATUS_HINTS = {
    401: " (the bearer token is missing, expired or wrong: refresh it with `oc whoami -t`)",
    403: " (the token's user may not do this: check its role in the project/namespace)",
    404: " (check that --host is the pipelines API route, not the dashboard URL)",
}


def _server_message(body: Any) -> str:
    """The ``message``/``error`` text of a KFP error body (``google.rpc.Status`` JSON), else the body, shortened."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    text = str(body or "")
    with contextlib.suppress(ValueError, AttributeError):
        parsed = json.loads(text)
        text = str(parsed.get("message") or parsed.get("error_message") or parsed.get("error") or text)
    return text[:_ERROR_TEXT_MAX]


def _redact(text: str, token: str) -> str:
    """``text`` with the token, every secret of the environment and token-like patterns masked."""
    from components._common.masking import mask_text

    return mask_text(text, extra=[token] if token else ())


# --------------------------------------------------------------------------------------------- arguments
def load_arguments(params: list[str], params_file: str = "") -> dict:
    """Builds a run's arguments from ``--param KEY=VALUE`` flags over a YAML/JSON file of parameters.

    Args:
        params: ``KEY=VALUE`` entries; VALUE is parsed as JSON when it parses (``3``, ``true``, ``[1, 2]``,
            ``"quoted"``), else taken as a plain string. A key given twice is an error.
        params_file: A YAML (or JSON) file holding a mapping of parameter name to value; empty for none.

    Returns:
        The arguments: the file's mapping updated by the flags.

    Raises:
        ValueError: An unreadable or malformed file (with the line), a file that is not a mapping, a non-string
            key, an entry without ``=`` or with an empty key, or a key given twice (naming the entry).
    """
    arguments = _read_params_file(params_file) if params_file else {}
    from_flags: dict[str, Any] = {}
    for index, entry in enumerate(params, start=1):
        key, separator, raw_value = entry.partition("=")
        key = key.strip()
        if not separator or not key:
            raise ValueError(
                f"--param #{index} {entry!r}: expected KEY=VALUE, e.g. --param phase_02_train_man_train_epochs=2"
            )
        if key in from_flags:
            raise ValueError(f"--param #{index} {entry!r}: parameter {key!r} is given twice")
        from_flags[key] = _parse_flag_value(raw_value)
    arguments.update(from_flags)
    return arguments


def _parse_flag_value(raw_value: str) -> Any:
    """The JSON value of ``raw_value`` when it is JSON, else the string itself."""
    try:
        return json.loads(raw_value)
    except ValueError:
        return raw_value


def _read_params_file(params_file: str) -> dict:
    """The mapping in a YAML/JSON parameters file; errors name the file (and line)."""
    try:
        text = Path(params_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise ValueError(f"cannot read the parameters file {params_file!r} (--params-file): {reason}") from None
    try:
        content = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{params_file}:{mark.line + 1}" if mark is not None else params_file
        problem = getattr(error, "problem", None) or str(error)
        raise ValueError(f"{where}: the parameters file (--params-file) is not valid YAML/JSON: {problem}") from None
    if content is None:
        return {}
    if not isinstance(content, dict):
        raise ValueError(
            f"{params_file}: the parameters file (--params-file) must hold a mapping of parameter name to value, "
            f"not a {type(content).__name__}"
        )
    for key in content:
        if not isinstance(key, str):
            raise ValueError(f"{params_file}: parameter name {key!r} (--params-file) must be a string")
    return dict(content)


# --------------------------------------------------------------------------------------------- pipeline package
def read_pipeline_spec(package_path: str) -> dict:
    """The pipeline spec (first YAML document) of a compiled pipeline package.

    Args:
        package_path: A pipeline compiled by ``kfp.compiler.Compiler`` (``.yaml``/``.yml``).

    Returns:
        The spec as a dict (``pipelineInfo``, ``root``, ...).

    Raises:
        ValueError: The file is missing, not YAML, or not a compiled pipeline.
    """
    path = Path(package_path)
    if path.suffix not in PACKAGE_SUFFIXES:
        raise ValueError(f"pipeline package {package_path!r}: expected a compiled pipeline YAML (.yaml or .yml)")
    try:
        documents = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    except OSError as error:
        raise ValueError(f"cannot read the pipeline package {package_path!r}: {error.strerror}") from None
    except yaml.YAMLError as error:
        raise ValueError(f"pipeline package {package_path!r} is not valid YAML: {error}") from None
    spec = documents[0] if documents else None
    if not isinstance(spec, dict) or not isinstance(spec.get("pipelineInfo"), dict) or "root" not in spec:
        raise ValueError(
            f"{package_path!r} is not a compiled KFP pipeline (no pipelineInfo/root): compile it first, "
            "e.g. `kfp-finetune compile`"
        )
    return spec


_TYPE_CHECKS = {
    "STRING": (lambda value: isinstance(value, str), "a string"),
    "NUMBER_INTEGER": (lambda value: isinstance(value, int) and not isinstance(value, bool), "an integer"),
    "NUMBER_DOUBLE": (lambda value: isinstance(value, (int, float)) and not isinstance(value, bool), "a number"),
    "BOOLEAN": (lambda value: isinstance(value, bool), "true or false"),
    "LIST": (lambda value: isinstance(value, list), "a JSON list"),
    "STRUCT": (lambda value: isinstance(value, dict), "a JSON object"),
}


def check_arguments(spec: dict, arguments: Mapping[str, Any], package_path: str) -> None:
    """Checks run arguments against the pipeline's declared parameters, before anything is sent.

    Args:
        spec: The pipeline spec (:func:`read_pipeline_spec`).
        arguments: Parameter name to value.
        package_path: The package's path, named in errors.

    Raises:
        ValueError: An unknown parameter, a value of the wrong type, or a required parameter left out.
    """
    declared = spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {}) or {}
    for name, value in arguments.items():
        if name not in declared:
            known = ", ".join(sorted(declared)) or "none"
            raise ValueError(f"parameter {name!r} is not a parameter of pipeline {package_path!r} (it has: {known})")
        parameter_type = declared[name].get("parameterType", "")
        check, expected = _TYPE_CHECKS.get(parameter_type, (lambda _value: True, ""))
        if not check(value):
            hint = ""
            if parameter_type == "STRING":
                hint = f"; to pass it as text, quote it: --param '{name}=\"{value}\"' or {name}: '{value}' in a file"
            raise ValueError(
                f"parameter {name!r} of pipeline {package_path!r} is {parameter_type} and needs {expected}, "
                f"got {value!r} ({type(value).__name__}){hint}"
            )
    missing = [
        name
        for name, definition in declared.items()
        if name not in arguments and "defaultValue" not in definition and not definition.get("isOptional")
    ]
    if missing:
        raise ValueError(f"pipeline {package_path!r} needs a value for {', '.join(sorted(missing))}: pass --param")


def default_version_name(pipeline_name: str, package_path: str, now: datetime.datetime | None = None) -> str:
    """A version name that tells uploads apart: ``<pipeline> <UTC time> <first 8 hex of the package's sha256>``."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    digest = hashlib.sha256(Path(package_path).read_bytes()).hexdigest()[:8]
    return f"{pipeline_name} {now:%Y-%m-%d %H:%M:%S} {digest}"


# --------------------------------------------------------------------------------------------- upload
def upload_pipeline(
    connection: Connection,
    package_path: str,
    pipeline_name: str,
    description: str = "",
    version_name: str = "",
) -> dict:
    """Uploads a compiled pipeline; when a pipeline of that name exists, uploads the package as a new version.

    Args:
        connection: Where and how to reach the KFP API.
        package_path: The compiled pipeline YAML.
        pipeline_name: The pipeline's display name in the dashboard.
        description: The pipeline's (or new version's) description.
        version_name: The new version's name when the pipeline exists; default
            ``<pipeline> <UTC time> <sha256 prefix>``. A new pipeline's first version is named after the pipeline by
            the server, so ``version_name`` applies from the second upload on.

    Returns:
        ``{"pipeline_id", "version_id", "version_name"}``.

    Raises:
        ValueError: An empty name or a package that is not a compiled pipeline.
        KfpApiError: The API refused a call (e.g. 409 for a version name that exists) or could not be reached.
    """
    read_pipeline_spec(package_path)
    pipeline_name = pipeline_name.strip()
    if not pipeline_name:
        raise ValueError("the pipeline name (--name) is empty")
    client = make_client(connection)
    pipeline_id = find_pipeline_id(client, connection, pipeline_name)
    if pipeline_id is None:
        return _upload_new_pipeline(client, connection, package_path, pipeline_name, description, version_name)
    version_name = version_name.strip() or default_version_name(pipeline_name, package_path)
    with api_errors(connection, f"upload version {version_name!r} of pipeline {pipeline_name!r}"):
        version = client.upload_pipeline_version(
            package_path, version_name, pipeline_id=pipeline_id, description=description or None
        )
    version_id = _returned_id(connection, version.pipeline_version_id, f"version {version_name!r}")
    return {"pipeline_id": pipeline_id, "version_id": version_id, "version_name": version_name}


def _upload_new_pipeline(
    client: kfp.Client,
    connection: Connection,
    package_path: str,
    pipeline_name: str,
    description: str,
    version_name: str,
) -> dict:
    """Uploads a pipeline that does not exist yet and finds the version the server created with it."""
    with api_errors(connection, f"upload pipeline {pipeline_name!r}"):
        pipeline = client.upload_pipeline(
            package_path,
            pipeline_name=pipeline_name,
            description=description or None,
            namespace=connection.namespace or None,
        )
    pipeline_id = _returned_id(connection, pipeline.pipeline_id, f"pipeline {pipeline_name!r}")
    with api_errors(connection, f"list the versions of pipeline {pipeline_name!r}"):
        versions = client.list_pipeline_versions(pipeline_id, page_size=1, sort_by="created_at desc")
    if not versions.pipeline_versions:
        raise KfpApiError(f"KFP API at {connection.host}: pipeline {pipeline_name!r} was uploaded without a version")
    version = versions.pipeline_versions[0]
    if version_name and version_name != version.display_name:
        LOGGER.warning(
            "pipeline %r is new: its first version is named %r by the server; --version applies to later uploads",
            pipeline_name,
            version.display_name,
        )
    return {
        "pipeline_id": pipeline_id,
        "version_id": _returned_id(connection, version.pipeline_version_id, f"the first version of {pipeline_name!r}"),
        "version_name": version.display_name,
    }


def find_pipeline_id(client: kfp.Client, connection: Connection, pipeline_name: str) -> str | None:
    """The id of the pipeline with this display name, or None.

    Raises:
        KfpApiError: The API refused the listing, or more than one pipeline has this name.
    """
    name_filter = json.dumps(
        {"predicates": [{"operation": "EQUALS", "key": "display_name", "stringValue": pipeline_name}]}
    )
    with api_errors(connection, f"look up pipeline {pipeline_name!r}"):
        listing = client.list_pipelines(page_size=2, filter=name_filter, namespace=connection.namespace or None)
    pipelines = listing.pipelines or []
    if len(pipelines) > 1:
        raise KfpApiError(f"KFP API at {connection.host}: more than one pipeline is named {pipeline_name!r}")
    return pipelines[0].pipeline_id if pipelines else None


# --------------------------------------------------------------------------------------------- run / schedule
def create_run(
    connection: Connection,
    package_path: str,
    arguments: dict,
    run_name: str = "",
    experiment_name: str = DEFAULT_EXPERIMENT,
) -> dict:
    """Starts one run of a compiled pipeline in an experiment (created when it does not exist).

    Args:
        connection: Where and how to reach the KFP API.
        package_path: The compiled pipeline YAML (sent as the run's pipeline spec).
        arguments: Pipeline parameter values (:func:`load_arguments`); checked against the pipeline's parameters.
        run_name: The run's display name; default ``<pipeline name> <UTC time>``.
        experiment_name: The experiment to run in.

    Returns:
        ``{"run_id", "experiment_id"}``.

    Raises:
        ValueError: A package that is not a compiled pipeline, an argument the pipeline does not declare or of the
            wrong type, a required parameter left out, or an empty experiment name.
        KfpApiError: The API refused a call or could not be reached.
    """
    spec = read_pipeline_spec(package_path)
    check_arguments(spec, arguments, package_path)
    experiment_name = _required_name(experiment_name, "experiment name (--experiment)")
    run_name = run_name.strip() or _default_run_name(spec)
    client = make_client(connection)
    experiment_id = ensure_experiment(client, connection, experiment_name)
    with api_errors(connection, f"create run {run_name!r}"):
        run = client.run_pipeline(
            experiment_id=experiment_id, job_name=run_name, pipeline_package_path=package_path, params=arguments
        )
    return {"run_id": _returned_id(connection, run.run_id, f"run {run_name!r}"), "experiment_id": experiment_id}


def schedule_run(
    connection: Connection,
    package_path: str,
    arguments: dict,
    job_name: str,
    experiment_name: str = DEFAULT_EXPERIMENT,
    cron: str = "",
    interval_seconds: int = 0,
    max_concurrency: int = 1,
    enabled: bool = True,
    no_catchup: bool = True,
) -> dict:
    """Creates a recurring run of a compiled pipeline, on a cron schedule or every ``interval_seconds``.

    Args:
        connection: Where and how to reach the KFP API.
        package_path: The compiled pipeline YAML (sent as the recurring run's pipeline spec).
        arguments: Pipeline parameter values (:func:`load_arguments`); checked against the pipeline's parameters.
        job_name: The recurring run's display name.
        experiment_name: The experiment its runs go to (created when it does not exist).
        cron: A 6-field cron expression with seconds, ``second minute hour day-of-month month day-of-week``
            (e.g. ``0 0 2 * * *``: 02:00 every day), or ``@daily``/``@every 6h``-style descriptors.
        interval_seconds: Seconds between runs (a periodic schedule). Exactly one of ``cron``/``interval_seconds``.
        max_concurrency: How many of its runs may run at once (1-10).
        enabled: Whether the schedule starts enabled.
        no_catchup: When True, a paused schedule does not backfill the runs it missed.

    Returns:
        ``{"recurring_run_id", "experiment_id"}``.

    Raises:
        ValueError: Not exactly one of cron/interval, a bad cron or interval, max_concurrency out of 1-10, an empty
            name, or bad arguments/package (as for :func:`create_run`).
        KfpApiError: The API refused a call or could not be reached.
    """
    cron = validate_cron(cron) if cron.strip() else ""
    _check_trigger(cron, interval_seconds)
    _check_max_concurrency(max_concurrency)
    job_name = _required_name(job_name, "recurring run name (--name)")
    experiment_name = _required_name(experiment_name, "experiment name (--experiment)")
    spec = read_pipeline_spec(package_path)
    check_arguments(spec, arguments, package_path)
    client = make_client(connection)
    experiment_id = ensure_experiment(client, connection, experiment_name)
    with api_errors(connection, f"create recurring run {job_name!r}"):
        recurring_run = client.create_recurring_run(
            experiment_id=experiment_id,
            job_name=job_name,
            cron_expression=cron or None,
            interval_second=interval_seconds or None,
            max_concurrency=max_concurrency,
            no_catchup=no_catchup,
            params=arguments,
            pipeline_package_path=package_path,
            enabled=enabled,
        )
    recurring_run_id = _returned_id(connection, recurring_run.recurring_run_id, f"recurring run {job_name!r}")
    return {"recurring_run_id": recurring_run_id, "experiment_id": experiment_id}


def ensure_experiment(client: kfp.Client, connection: Connection, experiment_name: str) -> str:
    """The id of the experiment with this name, created when it does not exist."""
    with api_errors(connection, f"get or create experiment {experiment_name!r}"):
        experiment = client.create_experiment(experiment_name, namespace=connection.namespace or None)
    return _returned_id(connection, experiment.experiment_id, f"experiment {experiment_name!r}")


def _returned_id(connection: Connection, resource_id: str | None, what: str) -> str:
    """The id the API returned for ``what``; a missing one means the host is not (only) a KFP API."""
    if not resource_id:
        raise KfpApiError(f"KFP API at {connection.host} returned no id for {what}: is --host the pipelines API route?")
    return resource_id


def _default_run_name(spec: dict) -> str:
    now = datetime.datetime.now(datetime.timezone.utc)
    return f"{spec['pipelineInfo'].get('name', 'pipeline')} {now:%Y-%m-%d %H:%M:%S}"


def _required_name(value: str, what: str) -> str:
    if not value or not value.strip():
        raise ValueError(f"the {what} is empty")
    return value.strip()


def _check_trigger(cron: str, interval_seconds: int) -> None:
    """Exactly one trigger: a cron expression or a positive whole number of seconds."""
    if isinstance(interval_seconds, bool) or not isinstance(interval_seconds, int) or interval_seconds < 0:
        raise ValueError(f"interval {interval_seconds!r} (--interval) must be a positive whole number of seconds")
    if bool(cron) == bool(interval_seconds):
        given = "both" if cron else "neither"
        raise ValueError(f"a schedule needs exactly one of --cron EXPR or --interval SECONDS; {given} was given")


def _check_max_concurrency(max_concurrency: int) -> None:
    low, high = MAX_CONCURRENCY_RANGE
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or not low <= max_concurrency <= high:
        raise ValueError(
            f"max concurrency {max_concurrency!r} must be a whole number from {low} to {high} (KFP's limit)"
        )


# --------------------------------------------------------------------------------------------- cron
_CRON_FIELDS = (
    ("second", 0, 59, {}),
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day-of-month", 1, 31, {}),
    ("month", 1, 12, {m: i for i, m in enumerate("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split(), 1)}),
    ("day-of-week", 0, 6, {d: i for i, d in enumerate("SUN MON TUE WED THU FRI SAT".split())}),
)
_CRON_DESCRIPTORS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
_GO_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+")
_CRON_FORMAT = (
    "KFP cron has 6 fields: second minute hour day-of-month month day-of-week, e.g. '0 0 2 * * *' (02:00 daily), "
    "or a descriptor such as @daily or '@every 6h'"
)


def validate_cron(expression: str) -> str:
    """Checks a cron expression the way the KFP scheduler (robfig/cron, with seconds) reads it.

    Args:
        expression: 6 space-separated fields ``second minute hour day-of-month month day-of-week`` (each ``*``,
            ``?``, a value, a range ``a-b``, a step ``*/n`` / ``a-b/n`` / ``a/n``, or a comma list of these;
            month and day-of-week also take names such as ``JAN`` and ``MON``), or a descriptor (``@hourly``,
            ``@daily``, ``@midnight``, ``@weekly``, ``@monthly``, ``@yearly``, ``@annually``, ``@every <duration>``).

    Returns:
        The expression with surrounding whitespace removed.

    Raises:
        ValueError: The expression, the field and the rule it breaks. A 5-field (classic crontab) expression is
            refused with the 6-field expression it probably means.
    """
    expression = expression.strip()
    if expression.startswith("@"):
        return _validate_cron_descriptor(expression)
    fields = expression.split()
    if len(fields) == 5:
        raise ValueError(
            f"cron {expression!r} has 5 fields, but {_CRON_FORMAT}; did you mean '0 {expression}'? "
            "(KFP would read a 5-field expression as starting with seconds)"
        )
    if len(fields) != 6:
        raise ValueError(f"cron {expression!r} has {len(fields)} fields, but {_CRON_FORMAT}")
    for text, (name, low, high, names) in zip(fields, _CRON_FIELDS):
        problem = _cron_field_problem(text, low, high, names)
        if problem:
            raise ValueError(f"cron {expression!r}: {name} field {text!r}: {problem}; {_CRON_FORMAT}")
    return expression


def _validate_cron_descriptor(expression: str) -> str:
    if expression.lower() in _CRON_DESCRIPTORS:
        return expression
    keyword, _, duration = expression.partition(" ")
    if keyword.lower() == "@every" and _GO_DURATION.fullmatch(duration.strip()) and re.search(r"[1-9]", duration):
        return expression
    raise ValueError(
        f"cron {expression!r}: unknown descriptor; use one of {', '.join(sorted(_CRON_DESCRIPTORS))} or "
        "'@every <duration>' (e.g. '@every 1h30m')"
    )


def _cron_field_problem(text: str, low: int, high: int, names: dict[str, int]) -> str:
    """What is wrong with one cron field (empty string when nothing is)."""
    for item in text.split(","):
        span, slash, step = item.partition("/")
        if slash and not (step.isdigit() and int(step) > 0):
            return f"step {step!r} must be a positive whole number"
        if span in ("*", "?"):
            continue
        start_text, dash, end_text = span.partition("-")
        start = _cron_value(start_text, names)
        end = _cron_value(end_text, names) if dash else start
        for value, value_text in ((start, start_text), (end, end_text if dash else start_text)):
            if value is None:
                return f"{value_text!r} is not a number{' or a name' if names else ''}"
            if not low <= value <= high:
                return f"{value} is outside {low}-{high}"
        if start > end:
            return f"range {span!r} runs backwards"
    return ""


def _cron_value(text: str, names: dict[str, int]) -> int | None:
    if text.isdigit():
        return int(text)
    return names.get(text.upper())
