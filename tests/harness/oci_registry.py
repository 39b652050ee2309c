"""A real OCI registry on 127.0.0.1: the CNCF distribution server (Debian's ``docker-registry``) fed by ``skopeo``.

Images are written as OCI image layouts in plain Python and pushed with ``skopeo copy`` (an independent client).
Tests skip with the reason when ``docker-registry``, ``skopeo`` or ``htpasswd`` is missing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.harness.http_server import free_port

AUTH_USER = "puller"
#: Test-only password of the htpasswd registry; tests assert it never appears in logs or errors.
AUTH_PASSWORD = "s3cret-Pull-Passw0rd"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
TITLE = "org.opencontainers.image.title"


def missing_tools(*extra: str) -> list[str]:
    """The registry tools (and ``extra`` ones) not on ``PATH``."""
    return [tool for tool in ("docker-registry", "skopeo", *extra) if shutil.which(tool) is None]


def _skip_without(*extra: str) -> None:
    if missing := missing_tools(*extra):
        pytest.skip(
            f"real OCI registry tests need {', '.join(missing)} (Debian: apt-get install -y docker-registry skopeo "
            "apache2-utils; scripts/setup.sh does it where apt is available)"
        )


def _blob(layout: Path, data: bytes) -> dict[str, object]:
    digest = hashlib.sha256(data).hexdigest()
    (layout / "blobs" / "sha256").mkdir(parents=True, exist_ok=True)
    (layout / "blobs" / "sha256" / digest).write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def tar_layer(files: Mapping[str, bytes]) -> bytes:
    """An uncompressed tar of ``files`` (path in the image -> content), directories included, fixed mtimes."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        directories = sorted({str(Path(name).parents[i]) for name in files for i in range(len(Path(name).parts) - 1)})
        for directory in directories:
            info = tarfile.TarInfo(directory)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 1_700_000_000
            tar.addfile(info)
        for name, content in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(content), 0o644, 1_700_000_000
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def model_files(model_dir: Path, prefix: str = "models") -> dict[str, bytes]:
    """The files of a model directory as image paths under ``prefix``."""
    return {
        f"{prefix}/{path.relative_to(model_dir).as_posix()}": path.read_bytes()
        for path in sorted(model_dir.rglob("*"))
        if path.is_file()
    }


def write_image_layout(layout: Path, layers: list[Mapping[str, bytes]], tag: str, history: bool = False) -> str:
    """Writes an OCI image layout with one gzip tar layer per mapping (``history``: one entry each, as builders do)."""
    layout.mkdir(parents=True, exist_ok=True)
    descriptors, diff_ids = [], []
    for files in layers:
        raw = tar_layer(files)
        diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
        descriptors.append({"mediaType": OCI_LAYER_GZIP, **_blob(layout, gzip.compress(raw, mtime=0))})
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }
    if history:
        config["history"] = [{"created_by": f"test layer {number}"} for number in range(len(layers))]
    return _finish_layout(
        layout, {"mediaType": OCI_CONFIG, **_blob(layout, json.dumps(config).encode())}, descriptors, tag
    )


def write_artifact_layout(layout: Path, files: Mapping[str, bytes], tag: str) -> str:
    """Writes an ORAS-style artifact: one raw layer per file, named by its title annotation; returns its digest."""
    layout.mkdir(parents=True, exist_ok=True)
    descriptors = [
        {"mediaType": "application/octet-stream", **_blob(layout, content), "annotations": {TITLE: name}}
        for name, content in sorted(files.items())
    ]
    config = {"mediaType": "application/vnd.oci.empty.v1+json", **_blob(layout, b"{}")}
    return _finish_layout(layout, config, descriptors, tag, artifact_type="application/vnd.example.model")


def _finish_layout(layout: Path, config: dict, layers: list[dict], tag: str, artifact_type: str = "") -> str:
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": config, "layers": layers}
    if artifact_type:
        manifest["artifactType"] = artifact_type
    descriptor = {"mediaType": OCI_MANIFEST, **_blob(layout, json.dumps(manifest).encode())}
    index = {
        "schemaVersion": 2,
        "manifests": [{**descriptor, "annotations": {"org.opencontainers.image.ref.name": tag}}],
    }
    (layout / "index.json").write_text(json.dumps(index))
    (layout / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}))
    return str(descriptor["digest"])


@dataclasses.dataclass
class RunningRegistry:
    """One ``docker-registry`` on ``host``; ``digests``: manifest digest by pushed reference (``models/tiny:1``)."""

    host: str
    process: subprocess.Popen
    scheme: str = "http"
    credentials: tuple[str, str] | None = None
    ca_bundle: Path | None = None
    digests: dict[str, str] = dataclasses.field(default_factory=dict)
    storage: Path | None = None
    token_server: Any = None

    def push(self, layout: Path, tag: str, reference: str) -> None:
        """Copies ``oci:<layout>:<tag>`` to ``<reference>`` (``repo:tag``) on this registry with skopeo."""
        command = ["skopeo", "copy", "--quiet", "--retry-times", "0"]
        if self.ca_bundle:
            command += ["--dest-cert-dir", str(self.ca_bundle.parent)]
        else:
            command += ["--dest-tls-verify=false"]
        if self.credentials:
            command += ["--dest-creds", ":".join(self.credentials)]
        command += [f"oci:{layout}:{tag}", f"docker://{self.host}/{reference}"]
        subprocess.run(command, check=True, capture_output=True, timeout=60)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def start_registry(
    directory: Path,
    htpasswd: Path | None = None,
    tls: tuple[Path, Path] | None = None,
    token: tuple[str, Path] | None = None,
) -> RunningRegistry:
    """Starts ``docker-registry`` in ``directory`` on a free port (basic auth, HTTPS or bearer tokens); once it answers.

    ``tls``: ``(certificate, key)``; ``token``: ``(realm URL, certificate)`` of :mod:`.oci_token_server`.
    """
    directory.mkdir(parents=True, exist_ok=True)
    port = free_port()
    http: dict[str, object] = {"addr": f"127.0.0.1:{port}", "secret": "test-only-upload-secret"}
    if tls:
        http["tls"] = {"certificate": str(tls[0]), "key": str(tls[1])}
    config: dict[str, object] = {
        "version": 0.1,
        "log": {"level": "error", "accesslog": {"disabled": True}},
        "storage": {"filesystem": {"rootdirectory": str(directory / "storage")}, "delete": {"enabled": True}},
        "http": http,
    }
    if htpasswd:
        config["auth"] = {"htpasswd": {"realm": "kfp-finetune-tests", "path": str(htpasswd)}}
    if token:
        from tests.harness.oci_token_server import ISSUER, SERVICE

        realm, certificate = token
        config["auth"] = {
            "token": {"realm": realm, "service": SERVICE, "issuer": ISSUER, "rootcertbundle": str(certificate)}
        }
    config_path = directory / "config.yml"
    config_path.write_text(json.dumps(config))  # JSON is YAML
    with (directory / "registry.log").open("wb") as log:  # the child keeps its own descriptor
        process = subprocess.Popen(["docker-registry", "serve", str(config_path)], stdout=log, stderr=subprocess.STDOUT)
    registry = RunningRegistry(
        f"127.0.0.1:{port}", process, "https" if tls else "http", ca_bundle=tls[0] if tls else None
    )
    registry.storage = directory / "storage"
    _wait_ready(registry, directory / "registry.log")
    return registry


def _wait_ready(registry: RunningRegistry, log: Path, timeout: float = 15.0) -> None:
    import ssl

    context = ssl.create_default_context(cafile=str(registry.ca_bundle)) if registry.ca_bundle else None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if registry.process.poll() is not None:
            raise RuntimeError(f"docker-registry exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            urllib.request.urlopen(f"{registry.scheme}://{registry.host}/v2/", timeout=2, context=context).close()
            return
        except urllib.error.HTTPError:  # 401 from an auth registry: it is up
            return
        except OSError:
            time.sleep(0.05)
    registry.stop()
    raise RuntimeError(f"docker-registry did not answer on {registry.host} within {timeout} s")


@contextlib.contextmanager
def _serving_tiny(registry: RunningRegistry, tiny_model_dir: Path, work: Path) -> Iterator[RunningRegistry]:
    """Pushes ``models/tiny:1`` (the model on a small base layer); stops the registry when the block ends."""
    try:
        base = {"bin/busybox": b"not really busybox\n", "etc/os-release": b"ID=test\n"}
        layout = work / "layouts" / "tiny"
        registry.digests["models/tiny:1"] = write_image_layout(layout, [base, model_files(tiny_model_dir)], "1")
        registry.push(layout, "1", "models/tiny:1")
        yield registry
    finally:
        registry.stop()


@pytest.fixture(scope="session")
def oci_registry(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Iterator[RunningRegistry]:
    """An anonymous HTTP registry with ``models/tiny:1``, ``models/tiny-oras:1`` and ``models/no-model:1``."""
    _skip_without()
    work = tmp_path_factory.mktemp("oci-registry")
    with _serving_tiny(start_registry(work / "server"), tiny_model_dir, work) as registry:
        files = {path.name: path.read_bytes() for path in sorted(tiny_model_dir.iterdir()) if path.is_file()}
        registry.digests["models/tiny-oras:1"] = write_artifact_layout(work / "layouts" / "tiny-oras", files, "1")
        registry.push(work / "layouts" / "tiny-oras", "1", "models/tiny-oras:1")
        layers = [{"bin/sh": b"#!/bin/true\n", "app/README": b"no model here\n"}]
        registry.digests["models/no-model:1"] = write_image_layout(work / "layouts" / "no-model", layers, "1")
        registry.push(work / "layouts" / "no-model", "1", "models/no-model:1")
        yield registry


@pytest.fixture(scope="session")
def oci_registry_auth(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Iterator[RunningRegistry]:
    """A registry with htpasswd basic auth (:data:`AUTH_USER` / :data:`AUTH_PASSWORD`) holding ``models/tiny:1``."""
    _skip_without("htpasswd")
    work = tmp_path_factory.mktemp("oci-registry-auth")
    htpasswd = work / "htpasswd"
    line = subprocess.run(
        ["htpasswd", "-nbB", AUTH_USER, AUTH_PASSWORD], check=True, capture_output=True, text=True, timeout=30
    ).stdout
    htpasswd.write_text(line.strip() + "\n")
    registry = start_registry(work / "server", htpasswd=htpasswd)
    registry.credentials = (AUTH_USER, AUTH_PASSWORD)
    with _serving_tiny(registry, tiny_model_dir, work):
        yield registry


@pytest.fixture(scope="session")
def oci_registry_tls(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Iterator[RunningRegistry]:
    """An anonymous HTTPS registry (self-signed; ``.ca_bundle`` verifies it) holding ``models/tiny:1``."""
    from tests.harness.tls import write_self_signed_certificate

    _skip_without()
    work = tmp_path_factory.mktemp("oci-registry-tls")
    certificate, key = write_self_signed_certificate(work / "certs", "registry", hostname="localhost")
    cert_dir = work / "skopeo-certs"  # skopeo's --dest-cert-dir wants *.crt CA files alone in a directory
    cert_dir.mkdir()
    shutil.copyfile(certificate, cert_dir / "ca.crt")
    registry = start_registry(work / "server", tls=(certificate, key))
    registry.ca_bundle = cert_dir / "ca.crt"
    with _serving_tiny(registry, tiny_model_dir, work):
        registry.ca_bundle = certificate
        yield registry


@pytest.fixture(scope="session")
def oci_registry_token(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path) -> Iterator[RunningRegistry]:
    """A registry with bearer-token auth; ``.token_server`` takes :data:`AUTH_USER` and counts the tokens issued."""
    from tests.harness.oci_token_server import TokenServer
    from tests.harness.tls import write_self_signed_certificate

    _skip_without()
    work = tmp_path_factory.mktemp("oci-registry-token")
    certificate, key = write_self_signed_certificate(work / "certs", "token-signer", hostname="token-issuer")
    server = TokenServer(certificate, key, AUTH_USER, AUTH_PASSWORD)
    try:
        registry = start_registry(work / "server", token=(server.url, certificate))
        registry.credentials = (AUTH_USER, AUTH_PASSWORD)
        registry.token_server = server
        with _serving_tiny(registry, tiny_model_dir, work):
            yield registry
    finally:
        server.stop()
