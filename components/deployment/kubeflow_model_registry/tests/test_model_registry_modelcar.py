"""Publishing the model as an OCI modelcar to the real ``docker-registry``, read back raw and with ``oci://``."""

from __future__ import annotations

import base64
import gzip
import io
import json
import tarfile
import urllib.request
from pathlib import Path

import pytest

from components.deployment.kubeflow_model_registry.modelcar import (
    PUSH_SECRET_ENV,
    ModelcarError,
    check_modelcar_options,
    files_time,
    lora_files,
    parse_modelcar_uri,
    publish_modelcar,
)
from components.deployment.kubeflow_model_registry.request import ModelcarOptions
from tests.harness.oci_registry import AUTH_PASSWORD, AUTH_USER, OCI_MANIFEST, write_image_layout

pytest.importorskip("olot", reason="modelcar publishing needs model-registry[olot] (olot is in the lock)")
BASE = {"bin/sh": b"#!/bin/true\n", "etc/os-release": b"ID=modelcar-base\n"}


def _options(target: str, base: str, lora_weights: str = "as_trained") -> ModelcarOptions:
    return ModelcarOptions(target, base, lora_weights, True)


def _push_base(registry, tmp_path: Path) -> str:
    layout = tmp_path / "base-layout"
    write_image_layout(layout, [BASE], "1", history=True)
    registry.push(layout, "1", "base/micro:1")
    return f"{registry.host}/base/micro:1"


def _get(registry, path: str, accept: str = "") -> bytes:
    request = urllib.request.Request(f"http://{registry.host}/v2/{path}", headers={"Accept": accept} if accept else {})
    if registry.credentials:
        token = base64.b64encode(":".join(registry.credentials).encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read()


def _layer_files(registry, repository: str, digest: str) -> dict[str, bytes]:
    manifest = json.loads(_get(registry, f"{repository}/manifests/{digest}", OCI_MANIFEST))
    files = {}
    for layer in manifest["layers"]:
        blob = _get(registry, f"{repository}/blobs/{layer['digest']}")
        if blob[:2] == b"\x1f\x8b":
            blob = gzip.decompress(blob)
        with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
            for member in tar.getmembers():
                if member.isfile():
                    files[member.name.lstrip("/")] = tar.extractfile(member).read()
    return files


def test_parse_target_rules():
    target = parse_modelcar_uri("oci://quay.io/org/tiny")
    assert (target.uri(), target.uri("sha256:" + "a" * 64)) == (
        "oci://quay.io/org/tiny:latest",
        "oci://quay.io/org/tiny@sha256:" + "a" * 64,
    )
    for bad in ("quay.io/org/tiny:1", "oci://quay.io/Org/tiny:1", "oci://quay.io/org/tiny@sha256:" + "a" * 64):
        with pytest.raises(ModelcarError, match="modelcar_uri="):
            parse_modelcar_uri(bad)


def test_lora_choices(tmp_path):
    (tmp_path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "/models/base"}))
    lora = {"algorithm": "lora"}
    assert lora_files(tmp_path, lora, "as_trained") == ("adapter", "/models/base")
    assert lora_files(tmp_path, lora, "merged") == ("merged", "")
    assert lora_files(tmp_path, {"algorithm": "sft"}, "adapter") == ("", "")
    (tmp_path / "adapter_config.json").unlink()
    with pytest.raises(ModelcarError, match="saved with the LoRA weights merged"):
        lora_files(tmp_path, lora, "adapter")
    with pytest.raises(ModelcarError, match="expected one of as_trained, merged, adapter"):
        check_modelcar_options(_options("", "", "both"))


def test_publish_pins_the_digest_the_layers_hold_the_model_and_the_projects_download_loads_it(
    oci_registry, tiny_model_dir, tmp_path
):
    from transformers import AutoModelForCausalLM

    from components.training.finetuning.oci.model import pull_model

    base = _push_base(oci_registry, tmp_path)
    lines: list[str] = []
    published = publish_modelcar(
        tiny_model_dir,
        {"algorithm": "sft"},
        _options(f"oci://{oci_registry.host}/published/tiny:v1", base),
        lines.append,
    )
    assert published.uri == f"oci://{oci_registry.host}/published/tiny@{published.digest}"
    assert published.tag_uri == f"oci://{oci_registry.host}/published/tiny:v1"
    # The tag resolves to the recorded digest.
    tagged = _get(oci_registry, "published/tiny/manifests/v1", OCI_MANIFEST)
    import hashlib

    assert "sha256:" + hashlib.sha256(tagged).hexdigest() == published.digest
    files = _layer_files(oci_registry, "published/tiny", published.digest)
    expected = {p.relative_to(tiny_model_dir).as_posix(): p.read_bytes() for p in tiny_model_dir.rglob("*.*")}
    assert {name: files[f"models/{name}"] for name in expected} == expected
    assert files["etc/os-release"] == BASE["etc/os-release"]  # layered on the base image
    pulled = pull_model(published.uri, tmp_path / "cache", {}, insecure=True, log=lines.append, source="test")
    assert pulled.digest == published.digest
    model = AutoModelForCausalLM.from_pretrained(pulled.path)
    assert model.config.model_type == "llama"
    assert any("modelcar pushed" in line for line in lines)


def test_push_with_the_secret_as_docker_config_json_and_without_it(
    oci_registry_auth, tiny_model_dir, tmp_path, monkeypatch
):
    base = _push_base(oci_registry_auth, tmp_path)
    target = f"oci://{oci_registry_auth.host}/published/tiny-auth:1"
    lines: list[str] = []
    monkeypatch.delenv(PUSH_SECRET_ENV, raising=False)
    with pytest.raises(ModelcarError, match="cannot pull modelcar_base_image=") as failed:
        publish_modelcar(tiny_model_dir, {}, _options(target, base), lines.append)
    assert len(str(failed.value).splitlines()) == 1
    auth = base64.b64encode(f"{AUTH_USER}:{AUTH_PASSWORD}".encode()).decode()
    monkeypatch.setenv(PUSH_SECRET_ENV, json.dumps({"auths": {oci_registry_auth.host: {"auth": auth}}}))
    published = publish_modelcar(tiny_model_dir, {}, _options(target, base), lines.append)
    assert "models/config.json" in _layer_files(oci_registry_auth, "published/tiny-auth", published.digest)
    assert not any(AUTH_PASSWORD in line or auth in line for line in lines)
    monkeypatch.setenv(PUSH_SECRET_ENV, "{not json")
    with pytest.raises(ModelcarError, match=f"{PUSH_SECRET_ENV} .*not a Docker config.json") as bad:
        publish_modelcar(tiny_model_dir, {}, _options(target, base), lines.append)
    assert "not json" not in str(bad.value)


def test_unreachable_registry_is_one_line(tiny_model_dir, tmp_path):
    with pytest.raises(ModelcarError, match="cannot pull modelcar_base_image='127.0.0.1:9/base:1'"):
        publish_modelcar(tiny_model_dir, {}, _options("oci://127.0.0.1:9/x/y:1", "127.0.0.1:9/base:1"), print)


@pytest.fixture
def lora_adapter(tiny_model_dir, tmp_path) -> Path:
    """A peft LoRA adapter of the tiny model (with its tokenizer), as Training Hub's LoRA saves it."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir), LoraConfig(r=4, target_modules=["q_proj", "v_proj"])
    )
    adapter = tmp_path / "adapter"
    model.save_pretrained(adapter)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(adapter)
    return adapter


def test_lora_adapter_published_merged_or_as_the_adapter_with_its_base(
    oci_registry, lora_adapter, tiny_model_dir, tmp_path
):
    from transformers import AutoModelForCausalLM

    from components.training.finetuning.oci.model import pull_model

    base = _push_base(oci_registry, tmp_path)
    target = f"oci://{oci_registry.host}/published/tiny-lora"
    lora = {"algorithm": "lora"}
    adapter = publish_modelcar(lora_adapter, lora, _options(f"{target}:adapter", base), print)
    assert (adapter.lora_weights, adapter.base_model) == ("adapter", str(tiny_model_dir))
    files = _layer_files(oci_registry, "published/tiny-lora", adapter.digest)
    assert "models/adapter_config.json" in files and "models/adapter_model.safetensors" in files
    merged = publish_modelcar(lora_adapter, lora, _options(f"{target}:merged", base, "merged"), print)
    assert (merged.lora_weights, merged.base_model) == ("merged", "")
    files = _layer_files(oci_registry, "published/tiny-lora", merged.digest)
    assert "models/adapter_config.json" not in files and "models/model.safetensors" in files
    again = publish_modelcar(lora_adapter, lora, _options(f"{target}:merged", base, "merged"), print)
    assert again.uri == merged.uri  # merged anew, the same image
    pulled = pull_model(merged.uri, tmp_path / "cache", {}, insecure=True, log=print, source="test")
    assert AutoModelForCausalLM.from_pretrained(pulled.path).config.model_type == "llama"  # loads without peft


def test_the_same_files_on_the_same_base_give_the_same_digest(oci_registry, tiny_model_dir, tmp_path):
    base = _push_base(oci_registry, tmp_path)
    target = f"oci://{oci_registry.host}/published/tiny-again:1"
    first = publish_modelcar(tiny_model_dir, {}, _options(target, base), print)
    import time

    time.sleep(1.1)  # olot stamps its layering time (seconds): a second later it would differ
    second = publish_modelcar(tiny_model_dir, {}, _options(target, base), print)
    assert second.uri == first.uri
    manifest = json.loads(_get(oci_registry, f"published/tiny-again/manifests/{first.digest}", OCI_MANIFEST))
    config = json.loads(_get(oci_registry, f"published/tiny-again/blobs/{manifest['config']['digest']}"))
    olot = [item for item in config["history"] if item["created_by"].startswith("olot ")]
    assert len(olot) == len(manifest["layers"]) - 1  # one per model file, on the base's one layer
    assert {item["created"] for item in olot} == {files_time(tiny_model_dir)}


def test_a_digest_skopeo_reports_that_the_registry_does_not_serve_is_never_returned(
    oci_registry, tiny_model_dir, tmp_path, monkeypatch
):
    """skopeo (a wrapper around the real one) reports another digest than the push made: refused, not published."""
    import os
    import shutil
    import stat

    real = shutil.which("skopeo")
    wrong = "sha256:" + "e" * 64
    wrapper = tmp_path / "bin" / "skopeo"
    wrapper.parent.mkdir()
    wrapper.write_text(
        "#!/bin/sh\n"
        f'"{real}" "$@" || exit $?\n'
        'prev=""; for arg in "$@"; do if [ "$prev" = "--digestfile" ]; then '
        f'printf "%s" "{wrong}" > "$arg"; fi; prev="$arg"; done\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    base = _push_base(oci_registry, tmp_path)
    lines: list[str] = []
    with pytest.raises(ModelcarError) as refused:
        publish_modelcar(
            tiny_model_dir,
            {"algorithm": "sft"},
            _options(f"oci://{oci_registry.host}/published/tiny:v2", base),
            lines.append,
        )
    message = str(refused.value)
    assert f"reported as {wrong}" in message and "the registry does not serve that digest" in message
    assert "\n" not in message and not any("modelcar pushed" in line for line in lines)
