"""``oci://`` base models from real registries on 127.0.0.1 (session fixtures), each test into its own cache."""

import base64
import json
import logging
from pathlib import Path

import pytest

from components.training.finetuning.oci.client import OciModelError
from components.training.finetuning.oci.model import PULL_RECORD, pull_model
from tests.harness.oci_registry import AUTH_PASSWORD, AUTH_USER, model_files, write_image_layout

BASIC = base64.b64encode(f"{AUTH_USER}:{AUTH_PASSWORD}".encode()).decode()


def _secret(host, **entry):
    return {"OCI_PULL_SECRET_MODEL_DOWNLOAD": json.dumps({"auths": {host: entry or {"auth": BASIC}}})}


def _same_files(pulled: Path, expected: Path) -> None:
    names = sorted(p.relative_to(pulled).as_posix() for p in pulled.rglob("*") if p.is_file())
    assert names == sorted(p.name for p in expected.iterdir() if p.is_file())
    for name in names:
        assert (pulled / name).read_bytes() == (expected / name).read_bytes(), name


def _leftovers(cache: Path) -> list[str]:
    """Everything in the OCI cache except complete pulls and the CA copies."""
    root = cache / "oci"
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(("sha256-", ".ca-"))) if root.exists() else []


def _no_secret_anywhere(*texts: str) -> None:
    for text in texts:
        assert AUTH_PASSWORD not in text and BASIC not in text


def test_modelcar_pull_takes_models_only_verifies_and_is_reused(oci_registry, tiny_model_dir, tmp_path):
    uri = f"oci://{oci_registry.host}/models/tiny:1"
    lines = []
    pulled = pull_model(uri, tmp_path, {}, insecure=True, log=lines.append)
    digest = oci_registry.digests["models/tiny:1"]
    assert pulled.digest == digest and not pulled.reused
    assert pulled.uri == f"oci://{oci_registry.host}/models/tiny@{digest}"
    assert pulled.path == tmp_path / "oci" / digest.replace(":", "-") / "model"
    _same_files(pulled.path, tiny_model_dir)  # the base layer's bin/ and etc/ are not part of the model
    record = json.loads((pulled.path.parent / PULL_RECORD).read_text())
    assert record["digest"] == digest and record["source"] == uri and len(record["files"]) == 6
    assert _leftovers(tmp_path) == []
    # A retried task: the tag still resolves to the same digest, and the complete copy is reused.
    again = pull_model(uri, tmp_path, {}, insecure=True, log=lines.append)
    assert again.reused and again.path == pulled.path
    # Pinned by digest, no registry call is needed at all (port 1 refuses connections).
    pinned = pull_model(f"oci://127.0.0.1:1/models/tiny@{digest}", tmp_path, {}, insecure=True, log=lines.append)
    assert pinned.reused and pinned.path == pulled.path
    assert any("reusing the verified copy" in line for line in lines)


def test_a_damaged_copy_is_pulled_again(oci_registry, tiny_model_dir, tmp_path):
    uri = f"oci://{oci_registry.host}/models/tiny:1"
    pulled = pull_model(uri, tmp_path, {}, insecure=True, log=lambda line: None)
    weights = pulled.path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])  # a copy cut short (e.g. a disk filled up)
    (tmp_path / "oci" / ".partial-sha256-dead-1").mkdir()  # left by a killed attempt
    again = pull_model(uri, tmp_path, {}, insecure=True, log=lambda line: None)
    assert not again.reused
    _same_files(again.path, tiny_model_dir)
    assert _leftovers(tmp_path) == []


def test_oras_artifact_files_become_the_model(oci_registry, tiny_model_dir, tmp_path):
    pulled = pull_model(f"oci://{oci_registry.host}/models/tiny-oras:1", tmp_path, {}, insecure=True, log=print)
    assert pulled.digest == oci_registry.digests["models/tiny-oras:1"]
    _same_files(pulled.path, tiny_model_dir)


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("models/tiny:2", r"tag '2' not found in 127\.0\.0\.1:\d+/models/tiny \(tags there: 1\)"),
        ("models/nope:1", r"repository models/nope not found in registry 127\.0\.0\.1:\d+"),
        ("models/tiny@sha256:" + "0" * 64, r"digest 'sha256:0{64}' not found"),
        ("models/no-model:1", r"image sha256:[0-9a-f]{64} has no model files: no /models directory"),
    ],
)
def test_clear_one_line_errors_and_nothing_left_behind(oci_registry, tmp_path, reference, message):
    with pytest.raises(OciModelError, match=message) as caught:
        pull_model(f"oci://{oci_registry.host}/{reference}", tmp_path, {}, insecure=True, log=lambda line: None)
    assert "\n" not in str(caught.value) and str(caught.value).startswith("training_base_model='oci://")
    assert _leftovers(tmp_path) == [] and not list((tmp_path / "oci").glob("sha256-*"))


def test_a_layer_that_does_not_match_its_digest_is_refused(oci_registry, tiny_model_dir, tmp_path):
    # A modelcar with a layer of its own, whose stored bytes are then damaged inside the registry's storage: the
    # registry serves them as they are, as a broken disk or a rewriting proxy would.
    files = {**model_files(tiny_model_dir), "models/NOTICE": b"corrupt me\n"}
    layout = tmp_path / "layout"
    write_image_layout(layout, [files], "1")
    oci_registry.push(layout, "1", "models/corrupt:1")
    index = json.loads((layout / "index.json").read_text())
    manifest_digest = index["manifests"][0]["digest"].split(":")[1]
    manifest = json.loads((layout / "blobs" / "sha256" / manifest_digest).read_text())
    layer = manifest["layers"][0]["digest"].split(":")[1]
    stored = next(oci_registry.storage.glob(f"**/blobs/sha256/{layer[:2]}/{layer}/data"))
    data = bytearray(stored.read_bytes())
    data[len(data) // 2] ^= 0xFF
    stored.write_bytes(bytes(data))
    cache = tmp_path / "cache"
    with pytest.raises(OciModelError, match=rf"digest mismatch for layer sha256:{layer}: the \d+ bytes received"):
        pull_model(f"oci://{oci_registry.host}/models/corrupt:1", cache, {}, insecure=True, log=lambda line: None)
    assert _leftovers(cache) == [] and not list((cache / "oci").glob("sha256-*"))


def test_htpasswd_registry_needs_the_config_json_secret(oci_registry_auth, tiny_model_dir, tmp_path, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    host = oci_registry_auth.host
    uri = f"oci://{host}/models/tiny:1"
    lines = []
    with pytest.raises(OciModelError, match="refused anonymous access") as anonymous:
        pull_model(uri, tmp_path / "a", {}, insecure=True, log=lines.append)
    assert f"auths['{host}']" in str(anonymous.value) and "OCI_PULL_SECRET_MODEL_DOWNLOAD" in str(anonymous.value)
    wrong = {"auth": base64.b64encode(f"{AUTH_USER}:not-the-password".encode()).decode()}
    with pytest.raises(OciModelError, match="rejected the credentials .* from OCI_PULL_SECRET_MODEL_DOWNLOAD"):
        pull_model(uri, tmp_path / "b", _secret(host, **wrong), insecure=True, log=lines.append)
    # config.json with auths.<host>.auth (what `docker login` writes) ...
    pulled = pull_model(uri, tmp_path / "c", _secret(host), insecure=True, log=lines.append)
    _same_files(pulled.path, tiny_model_dir)
    # ... or username/password, from a kubernetes.io/dockerconfigjson secret's .dockerconfigjson key.
    env = {
        "OCI_PULL_SECRET_DOCKERCONFIGJSON": json.dumps(
            {"auths": {f"https://{host}/v1/": {"username": AUTH_USER, "password": AUTH_PASSWORD}}}
        )
    }
    assert pull_model(uri, tmp_path / "d", env, insecure=True, log=lines.append).digest == pulled.digest
    captured = capsys.readouterr()
    _no_secret_anywhere("\n".join(lines), caplog.text, captured.out, captured.err, str(anonymous.value))


def test_bearer_token_flow_with_the_secret(oci_registry_token, tiny_model_dir, tmp_path, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    host = oci_registry_token.host
    uri = f"oci://{host}/models/tiny:1"
    issued = oci_registry_token.token_server.issued
    with pytest.raises(OciModelError, match="refused anonymous access to models/tiny"):
        pull_model(uri, tmp_path / "a", {}, insecure=True, log=lambda line: None)
    pulled = pull_model(uri, tmp_path / "b", _secret(host), insecure=True, log=print)
    _same_files(pulled.path, tiny_model_dir)
    assert oci_registry_token.token_server.issued > issued  # the registry's Bearer challenge was answered
    captured = capsys.readouterr()
    _no_secret_anywhere(caplog.text, captured.out, captured.err)


def test_tls_is_verified_by_default_with_a_ca_bundle_option(oci_registry_tls, tiny_model_dir, tmp_path):
    uri = f"oci://{oci_registry_tls.host}/models/tiny:1"
    with pytest.raises(
        OciModelError,
        match="TLS verification of registry .* failed .*CERTIFICATE_VERIFY_FAILED.*set training_oci_ca_bundle",
    ):
        pull_model(uri, tmp_path / "a", {}, log=lambda line: None)
    pulled = pull_model(uri, tmp_path / "b", {}, ca_bundle=str(oci_registry_tls.ca_bundle), log=lambda line: None)
    _same_files(pulled.path, tiny_model_dir)
    pem = oci_registry_tls.ca_bundle.read_text()
    assert pull_model(uri, tmp_path / "c", {}, ca_bundle=pem, log=lambda line: None).digest == pulled.digest
    assert pull_model(uri, tmp_path / "d", {}, insecure=True, log=lambda line: None).digest == pulled.digest
    with pytest.raises(OciModelError, match="training_oci_ca_bundle='/nowhere/ca.pem': no such file"):
        pull_model(uri, tmp_path / "e", {}, ca_bundle="/nowhere/ca.pem", log=lambda line: None)


def test_plain_http_registry_without_the_opt_out_says_what_to_set(oci_registry, tmp_path):
    with pytest.raises(OciModelError, match=r"seems to speak plain HTTP.*oci_insecure=True"):
        pull_model(f"oci://{oci_registry.host}/models/tiny:1", tmp_path, {}, log=lambda line: None)
