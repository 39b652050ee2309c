"""Pulls an ``oci://`` base model into the workspace: once per run, verified by digest, never half-written.

The registry protocol (``/v2/`` manifests and blobs, the ``WWW-Authenticate`` bearer-token flow, basic auth, TLS)
is the `oras <https://pypi.org/project/oras/>`_ Python SDK's (:class:`oras.provider.Registry`); this module adds what
a training run needs around it:

* what to take from the image: the ``/models`` directory of a *modelcar* image (its tar layers applied in order,
  whiteouts honoured, only ``models/...`` entries extracted, each through :mod:`tarfile`'s ``data`` filter), or the
  files of an ORAS-style artifact (one layer per file, named by its ``org.opencontainers.image.title``);
* verification: the manifest's and every layer's SHA-256 are checked against their digests while streaming;
* the cache: ``<cache_root>/oci/sha256-<manifest digest>/`` is staged as a hidden sibling on the same filesystem and
  renamed into place only when complete, with ``pull.json`` (digest, file sizes) inside; a retried task reuses it
  after checking the digest and the sizes (a pinned ``@sha256:`` reference needs no registry call at all);
* bounded behaviour: per-request timeouts and at most :data:`ATTEMPTS` tries on connection errors, 429 and 5xx
  (instead of the SDK's own retry loop, which sleeps up to 83 s per try), and one-line errors for a missing repository
  or tag, a refused login (naming the secret and key to fix), TLS failures, an image without model files and a digest
  mismatch. Credentials never reach a log line or an error message.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
import tarfile
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from components.training.finetuning.oci_auth import (
    SECRET_HINT,
    OciModelError,
    OciReference,
    credentials_for,
    docker_config_from_env,
    parse_oci_uri,
)

#: Tries per registry request on connection errors, timeouts, 429 and 5xx.
ATTEMPTS = 3
#: (connect, read) timeout of one request in seconds; a read timeout applies between chunks of a blob.
TIMEOUT = (15.0, 120.0)
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
TITLE_ANNOTATION = "org.opencontainers.image.title"
UNPACK_ANNOTATION = "io.deis.oras.content.unpack"
#: The directory of a modelcar image that holds the model (KServe's convention).
MODELCAR_DIR = "models"
PULL_RECORD = "pull.json"


@dataclasses.dataclass(frozen=True)
class PulledModel:
    """A model pulled (or reused) from an OCI registry.

    Attributes:
        path: The model directory (holds ``config.json``), used like a local model.
        digest: The manifest digest the reference resolved to (``sha256:...``).
        uri: The reference pinned to that digest (``oci://host/repo@sha256:...``).
        reused: Whether a complete copy from an earlier attempt was reused.
    """

    path: Path
    digest: str
    uri: str
    reused: bool = False


def _registry_class() -> type:
    import oras.provider
    import requests

    unwrapped = oras.provider.Registry.do_request.__wrapped__  # the SDK's request without its slow retry decorator

    class Registry(oras.provider.Registry):
        """oras' registry client with bounded retries (:data:`ATTEMPTS`, short back-off)."""

        def do_request(self, *args: Any, **kwargs: Any) -> Any:
            for attempt in range(1, ATTEMPTS + 1):
                try:
                    response = unwrapped(self, *args, **kwargs)
                except requests.exceptions.SSLError:
                    raise
                except (requests.ConnectionError, requests.Timeout):
                    if attempt == ATTEMPTS:
                        raise
                else:
                    if response.status_code not in (429, 500, 502, 503, 504) or attempt == ATTEMPTS:
                        return response
                    response.close()
                time.sleep(0.5 * attempt)
            raise AssertionError("unreachable")

    return Registry


def _session(verify: bool | str) -> Any:
    from http.cookiejar import DefaultCookiePolicy

    import requests

    class Session(requests.Session):
        def request(self, method: str, url: str, **kwargs: Any) -> Any:
            kwargs.setdefault("timeout", TIMEOUT)
            if kwargs.get("verify") is None:
                kwargs["verify"] = verify
            return super().request(method, url, **kwargs)

    session = Session()
    session.cookies.set_policy(DefaultCookiePolicy(allowed_domains=[]))
    return session


@dataclasses.dataclass
class _Connection:
    registry: Any
    ref: OciReference
    source: str
    has_credentials: bool
    credentials_from: str

    def url(self, kind: str, reference: str) -> str:
        return f"{self.registry.prefix}://{self.ref.registry}/v2/{self.ref.repository}/{kind}/{reference}"

    def get(self, kind: str, reference: str, headers: dict | None = None, stream: bool = False) -> Any:
        try:
            response = self.registry.do_request(self.url(kind, reference), "GET", headers=headers or {}, stream=stream)
        except ValueError:  # the SDK could not answer the authentication challenge
            raise self.denied(401) from None
        except Exception as error:  # noqa: BLE001 - connection problems become one line naming the registry
            raise OciModelError(f"{self.source}: cannot reach registry {self.ref.registry}: {_reason(error)}") from None
        if response.status_code in (401, 403):
            raise self.denied(response.status_code)
        return response

    def denied(self, status: int) -> OciModelError:
        host, repo = self.ref.registry, self.ref.repository
        if not self.has_credentials:
            return OciModelError(
                f"{self.source}: registry {host} refused anonymous access to {repo} (HTTP {status}); no credentials "
                f"for {host} in the pull secret: put a Docker config.json with auths[{host!r}] into {SECRET_HINT}"
            )
        return OciModelError(
            f"{self.source}: registry {host} rejected the credentials for {host} from {self.credentials_from} "
            f"(HTTP {status}); fix auths[{host!r}] in {SECRET_HINT}, whose user needs pull access to {repo}"
        )


def _reason(error: BaseException) -> str:
    """The useful tail of a requests/urllib3 error (``[Errno 111] Connection refused``, the SSL reason)."""
    text = str(error)
    found = re.search(r"\[Errno -?\d+\] [^'\")]+", text) or re.search(r"\[SSL[^\]]*\] [^'\")(]+", text)
    return (found.group(0) if found else text).strip()[:200] or type(error).__name__


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def connect(ref: OciReference, env: Mapping[str, str], insecure: bool, ca_bundle: str, source: str) -> _Connection:
    """Probes ``/v2/``, picks the SDK's auth backend from the challenge (bearer token or basic) and logs in.

    Raises:
        OciModelError: Unreachable, TLS failure, not a registry, or basic auth required without credentials.
    """
    import requests

    config, variable = docker_config_from_env(env)
    credentials = credentials_for(config, ref.registry, variable)
    attempts = [("https", False), ("http", False)] if insecure else [("https", ca_bundle or True)]
    for scheme, verify in attempts:
        session = _session(verify)
        try:
            probe = session.get(f"{scheme}://{ref.registry}/v2/")
        except requests.exceptions.SSLError as error:
            if insecure:
                continue  # a plain-HTTP registry answers a TLS handshake with garbage: try http://
            reason = _reason(error)
            if "WRONG_VERSION_NUMBER" in reason:
                reason += ": it seems to speak plain HTTP"
            raise OciModelError(
                f"{source}: TLS verification of registry {ref.registry} failed ({reason}); set oci_ca_bundle "
                "to the CA bundle (PEM) that signed its certificate, or oci_insecure=True for an in-cluster HTTP "
                "registry"
            ) from None
        except requests.RequestException as error:
            if insecure and scheme == "https":
                continue
            raise OciModelError(f"{source}: cannot reach registry {ref.registry}: {_reason(error)}") from None
        challenge = probe.headers.get("WWW-Authenticate", "")
        if probe.status_code not in (200, 401):
            raise OciModelError(
                f"{source}: {scheme}://{ref.registry}/v2/ answered HTTP {probe.status_code} (an OCI registry answers "
                "200 or 401); check the registry host and port"
            )
        backend = "basic" if challenge.lower().startswith("basic") else "token"
        registry = _registry_class()(
            hostname=ref.registry, insecure=scheme == "http", tls_verify=verify, auth_backend=backend
        )
        registry.session = registry.auth.session = session
        connection = _Connection(registry, ref, source, credentials is not None, variable)
        if credentials:
            registry.auth.set_basic_auth(*credentials)
        elif backend == "basic":
            raise connection.denied(401)
        return connection
    raise OciModelError(f"{source}: cannot reach registry {ref.registry} over https:// or http://")


def _not_found(connection: _Connection, reference: str) -> OciModelError:
    ref, source = connection.ref, connection.source
    tags = connection.get("tags", "list")
    if tags.status_code == 404:
        return OciModelError(
            f"{source}: repository {ref.repository} not found in registry {ref.registry}; check the repository path"
        )
    listed = (tags.json().get("tags") or []) if tags.status_code == 200 else []
    shown = ", ".join(sorted(listed)[:20]) or "none"
    what = "digest" if reference.startswith("sha256:") else "tag"
    return OciModelError(
        f"{source}: {what} {reference!r} not found in {ref.registry}/{ref.repository} (tags there: {shown})"
    )


def fetch_manifest(connection: _Connection, reference: str) -> tuple[dict, str]:
    """The manifest at ``reference`` (tag or digest) and its verified digest.

    Raises:
        OciModelError: Unknown repository/tag, refused access, or the content does not match the digest.
    """
    accept = ", ".join(MANIFEST_TYPES + INDEX_TYPES)
    response = connection.get("manifests", reference, headers={"Accept": accept})
    if response.status_code == 404:
        raise _not_found(connection, reference)
    if response.status_code != 200:
        raise OciModelError(
            f"{connection.source}: registry {connection.ref.registry} answered HTTP {response.status_code} for "
            f"manifest {reference}: {response.text[:200]}"
        )
    digest = "sha256:" + hashlib.sha256(response.content).hexdigest()
    expected = reference if reference.startswith("sha256:") else response.headers.get("Docker-Content-Digest", "")
    if expected.startswith("sha256:") and expected != digest:
        raise OciModelError(
            f"{connection.source}: digest mismatch for manifest {reference}: expected {expected}, the registry sent "
            f"content with {digest}; refusing it (check the reference, or a proxy rewriting the registry's answers)"
        )
    return json.loads(response.content), digest


def resolve_image_manifest(connection: _Connection, manifest: dict) -> dict:
    """The image manifest itself, or for an index the ``linux/amd64`` entry (else the first)."""
    if manifest.get("mediaType") in INDEX_TYPES or ("manifests" in manifest and "layers" not in manifest):
        entries = manifest.get("manifests") or []
        if not entries:
            raise OciModelError(f"{connection.source}: the image index lists no manifests")
        chosen = next(
            (
                e
                for e in entries
                if (e.get("platform") or {}).get("os") == "linux"
                and (e.get("platform") or {}).get("architecture") == "amd64"
            ),
            entries[0],
        )
        manifest, _ = fetch_manifest(connection, chosen["digest"])
    if "layers" not in manifest:
        raise OciModelError(
            f"{connection.source}: unsupported manifest (mediaType {manifest.get('mediaType')!r}, schemaVersion "
            f"{manifest.get('schemaVersion')}); push an OCI or Docker v2 image"
        )
    return manifest


def download_blob(connection: _Connection, descriptor: Mapping[str, Any], target: Path) -> None:
    """Streams a blob to ``target``, checking its SHA-256 against the descriptor's digest.

    Raises:
        OciModelError: HTTP error, non-sha256 digest or digest mismatch (``target`` is removed).
    """
    digest, source = str(descriptor.get("digest", "")), connection.source
    if not digest.startswith("sha256:"):
        raise OciModelError(f"{source}: layer digest {digest!r} is not sha256:<hex>; only sha256 is supported")
    hasher, size = hashlib.sha256(), 0
    with connection.get("blobs", digest, stream=True) as response:
        if response.status_code != 200:
            raise OciModelError(
                f"{source}: registry {connection.ref.registry} answered HTTP {response.status_code} for layer {digest}"
            )
        with target.open("wb") as handle:
            for chunk in response.iter_content(chunk_size=1 << 20):
                hasher.update(chunk)
                handle.write(chunk)
                size += len(chunk)
    actual = "sha256:" + hasher.hexdigest()
    if actual != digest:
        target.unlink(missing_ok=True)
        raise OciModelError(
            f"{source}: digest mismatch for layer {digest}: the {size} bytes received hash to {actual}; "
            "the registry (or a proxy) served different content, so nothing was kept"
        )


def _safe_relative(name: str, source: str, what: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts:
        raise OciModelError(f"{source}: {what} {name!r} is not a safe relative path; refusing to write it")
    return path


def _extract(tar: tarfile.TarFile, member: tarfile.TarInfo, name: str, linkname: str, dest: Path, source: str) -> None:
    try:
        tar.extract(member.replace(name=name, linkname=linkname, deep=False), dest, filter="data")
    except tarfile.FilterError as error:
        raise OciModelError(
            f"{source}: unsafe entry {member.name!r} in an image layer ({error}); refusing it"
        ) from None


def _within_models(name: str) -> str | None:
    parts = [part for part in PurePosixPath(name).parts if part not in ("/", ".")]
    if len(parts) < 2 or parts[0] != MODELCAR_DIR:
        return None
    return "/".join(parts[1:])


def extract_modelcar_layer(blob: Path, model_dir: Path, source: str) -> None:
    """Applies one image layer's ``models/...`` entries to ``model_dir`` (whiteouts remove earlier files)."""
    try:
        tar = tarfile.open(blob, mode="r:*")
    except tarfile.TarError as error:
        raise OciModelError(f"{source}: an image layer is not a (gzip) tar ({error}); push gzip or plain tar layers")
    with tar:
        for member in tar:
            relative = _within_models(member.name)
            if relative is None:
                continue
            path = PurePosixPath(relative)
            if path.name == ".wh..wh..opq":
                opaque = model_dir / path.parent
                for child in opaque.iterdir() if opaque.is_dir() else ():
                    _remove(child)
                continue
            if path.name.startswith(".wh."):
                removed = model_dir / _safe_relative(str(path.parent / path.name[4:]), source, "whiteout")
                _remove(removed)
                continue
            linkname = member.linkname
            if member.islnk():
                linkname = _within_models(member.linkname) or ""
                if not linkname:
                    continue  # a hard link to a file outside /models: nothing of the model
            _extract(tar, member, relative, linkname, model_dir, source)


def add_artifact_layer(blob: Path, descriptor: Mapping[str, Any], model_dir: Path, source: str) -> None:
    """Places an ORAS-style layer: its file under its title, or a directory tarball (``unpack``) unpacked."""
    annotations = descriptor.get("annotations") or {}
    title = _safe_relative(str(annotations.get(TITLE_ANNOTATION, "")), source, "layer title")
    if str(annotations.get(UNPACK_ANNOTATION, "")).lower() == "true":
        with tarfile.open(blob, mode="r:*") as tar:
            for member in tar:
                _extract(tar, member, member.name, member.linkname, model_dir, source)
        return
    target = model_dir / title
    target.parent.mkdir(parents=True, exist_ok=True)
    blob.replace(target)


def _is_tar_layer(media_type: str) -> bool:
    return "tar" in media_type or "rootfs.diff" in media_type


def locate_model(model_dir: Path, source: str, digest: str) -> Path:
    """The directory holding ``config.json`` (the shallowest one).

    Raises:
        OciModelError: No model files at all, or files but no ``config.json``.
    """
    files = [p for p in model_dir.rglob("*") if p.is_file()]
    if not files:
        raise OciModelError(
            f"{source}: image {digest} has no model files: no /{MODELCAR_DIR} directory in its layers and no "
            "ORAS file layers; build a modelcar with the model under /models (or push the files with oras)"
        )
    configs = sorted(model_dir.rglob("config.json"), key=lambda p: len(p.parts))
    if not configs:
        shown = ", ".join(sorted(p.relative_to(model_dir).as_posix() for p in files)[:10])
        raise OciModelError(
            f"{source}: image {digest} has files ({shown}) but no config.json: not a Hugging Face model directory"
        )
    return configs[0].parent


def _verified_copy(final: Path, digest: str) -> Path | None:
    """The model path of a complete earlier pull of ``digest`` whose files all have their recorded sizes."""
    try:
        record = json.loads((final / PULL_RECORD).read_text())
    except (OSError, ValueError):
        return None
    if record.get("digest") != digest:
        return None
    for name, size in (record.get("files") or {}).items():
        path = final / name
        if not path.is_file() or path.stat().st_size != size:
            return None
    return final / record["model_dir"]


def _ca_bundle_file(ca_bundle: str, oci_root: Path) -> str:
    value = ca_bundle.strip()
    if not value:
        return ""
    if value.startswith("-----BEGIN"):
        path = oci_root / f".ca-{hashlib.sha256(value.encode()).hexdigest()[:16]}.pem"
        path.write_text(value + "\n")
        return str(path)
    if not Path(value).is_file():
        raise OciModelError(f"oci_ca_bundle={value!r}: no such file; give a PEM file path in the task or PEM text")
    return value


def pull_model(
    uri: str,
    cache_root: Path,
    env: Mapping[str, str],
    *,
    insecure: bool = False,
    ca_bundle: str = "",
    log: Callable[[str], None] = print,
    source: str = "base_model",
) -> PulledModel:
    """Pulls ``uri`` into ``<cache_root>/oci/sha256-<hex>/`` (or reuses a verified complete copy).

    Args:
        uri: ``oci://<registry>/<repository>[:<tag>|@sha256:<digest>]``.
        cache_root: A directory on the workspace shared with the training pods.
        env: Environment holding the pull secret (see :mod:`.oci_auth`); never logged.
        insecure: Skip TLS verification and allow plain HTTP (in-cluster registries).
        ca_bundle: A CA bundle (PEM file path or PEM text) to verify the registry's certificate with.
        log: Progress sink.
        source: The parameter named in errors.

    Returns:
        The pulled model.

    Raises:
        OciModelError: Any problem, as one line naming the reference and what to fix.
    """
    ref = parse_oci_uri(uri, source)
    where = f"{source}={uri!r}"
    oci_root = Path(cache_root) / "oci"
    oci_root.mkdir(parents=True, exist_ok=True)
    for stale in oci_root.glob(".partial-*"):  # left by an attempt that was killed mid-pull
        shutil.rmtree(stale, ignore_errors=True)
    if ref.digest:
        reused = _verified_copy(oci_root / ref.digest.replace(":", "-"), ref.digest)
        if reused is not None:
            log(f"{source}: reusing the verified copy of {ref.uri()} at {reused}")
            return PulledModel(reused, ref.digest, ref.uri(), reused=True)
    connection = connect(ref, env, insecure, _ca_bundle_file(ca_bundle, oci_root), where)
    top, digest = fetch_manifest(connection, ref.reference)
    final = oci_root / digest.replace(":", "-")
    reused = _verified_copy(final, digest)
    if reused is not None:
        log(f"{source}: {ref.uri()} is {digest}; reusing the verified copy at {reused}")
        return PulledModel(reused, digest, ref.uri(digest), reused=True)
    shutil.rmtree(final, ignore_errors=True)  # incomplete or tampered: pull afresh
    started = time.monotonic()
    manifest = resolve_image_manifest(connection, top)
    staging = Path(tempfile.mkdtemp(dir=oci_root, prefix=f".partial-{digest.replace(':', '-')}-"))
    try:
        model_dir = staging / "model"
        model_dir.mkdir()
        layers = manifest.get("layers") or []
        log(f"{source}: pulling {ref.uri()} ({digest}, {len(layers)} layers) from {ref.registry}")
        for index, descriptor in enumerate(layers):
            annotations = descriptor.get("annotations") or {}
            media_type = str(descriptor.get("mediaType", ""))
            if not annotations.get(TITLE_ANNOTATION) and not _is_tar_layer(media_type):
                continue  # neither an ORAS file nor an image layer (e.g. a signature blob)
            blob = staging / f".layer-{index}"
            download_blob(connection, descriptor, blob)
            if annotations.get(TITLE_ANNOTATION):
                add_artifact_layer(blob, descriptor, model_dir, where)
            else:
                extract_modelcar_layer(blob, model_dir, where)
            blob.unlink(missing_ok=True)
        located = locate_model(model_dir, where, digest)
        files = {p.relative_to(staging).as_posix(): p.stat().st_size for p in model_dir.rglob("*") if p.is_file()}
        record = {
            "digest": digest,
            "uri": ref.uri(digest),
            "source": ref.uri(),
            "model_dir": located.relative_to(staging).as_posix(),
            "files": files,
        }
        (staging / PULL_RECORD).write_text(json.dumps(record, indent=1, sort_keys=True))
        try:
            staging.rename(final)
        except OSError:  # another attempt completed the same digest first: keep its copy if it verifies
            if _verified_copy(final, digest) is None:
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    total = sum(files.values())
    log(f"{source}: pulled {len(files)} files ({total / 1e6:.1f} MB) in {time.monotonic() - started:.1f} s to {final}")
    return PulledModel(final / record["model_dir"], digest, ref.uri(digest))
