"""The image check of ``compile``/``upload``/``run``/``doctor``, and ``images``, against real loopback registries
(anonymous and token-realm, ``tests/harness/oci_registry.py``) and kmock (ImageStreams, pull secrets).
"""

import base64
import json
import re
import socket
import time

import pytest
import yaml

from components._common.images import STEP_IMAGE
from pipelines.cli import main
from pipelines.doctor.cluster import Cluster
from pipelines.doctor.images import INTERNAL_REGISTRY, check_images_in_namespace
from pipelines.images.pull_check import NO_CHECK_ENV, check_images, fix_for
from pipelines.images.registry import DENIED, FOUND, MISSING, UNREACHABLE, check_manifest, parse_image
from tests.harness.tcp_proxy import closed_port

NS = "team"
HUB_API = "registry-1.docker.io"


@pytest.fixture
def image_check_on(monkeypatch):
    """The check on (the suite turns it off: it compiles offline)."""
    monkeypatch.delenv(NO_CHECK_ENV, raising=False)


def test_references_read_as_a_container_runtime_reads_them():
    hub = parse_image("python:3.11")
    assert (hub.registry, hub.repository, hub.tag, hub.api_host) == ("docker.io", "library/python", "3.11", HUB_API)
    assert parse_image("docker.io/pytorch/pytorch:2.7.1").repository == "pytorch/pytorch"
    digest = "sha256:" + "a" * 64
    local = parse_image(f"127.0.0.1:5000/models/tiny@{digest}")
    assert (local.registry, local.tag, local.manifest_reference, local.loopback) == ("127.0.0.1:5000", "", digest, True)
    assert parse_image("quay.io/org/name").tag == "latest" and not parse_image("quay.io/org/name").loopback
    with pytest.raises(ValueError, match="is not a valid image reference"):
        parse_image("quay.io/Org/Name:1")


def test_the_fix_for_a_missing_project_image_is_to_build_it():
    fix = fix_for(parse_image(STEP_IMAGE))
    assert "podman build" in fix and "-f Containerfile" in fix and "oc new-build --binary --strategy=docker" in fix
    assert "--image" in fix
    assert "skopeo copy" in fix_for(parse_image("docker.io/library/python:3.11.11-slim-bookworm"))


def test_manifests_of_an_anonymous_registry(oci_registry):
    found = check_manifest(parse_image(f"{oci_registry.host}/models/tiny:1"))
    assert (found.status, found.digest) == (FOUND, oci_registry.digests["models/tiny:1"])
    assert check_manifest(parse_image(f"{oci_registry.host}/models/tiny:2")).status == MISSING
    assert check_manifest(parse_image(f"{oci_registry.host}/models/absent:1")).status == MISSING
    pinned = check_manifest(parse_image(f"{oci_registry.host}/models/tiny@{oci_registry.digests['models/tiny:1']}"))
    assert pinned.status == FOUND


def test_the_bearer_token_flow_with_and_without_the_pull_secret(oci_registry_token):
    image = f"{oci_registry_token.host}/models/tiny:1"
    anonymous = check_manifest(parse_image(image))
    assert anonymous.status == DENIED and not anonymous.authenticated
    issued = oci_registry_token.token_server.issued
    found = check_manifest(parse_image(image), oci_registry_token.credentials)
    assert found.status == FOUND and found.authenticated
    assert oci_registry_token.token_server.issued == issued + 1  # the realm's token, then the manifest with it
    wrong = check_manifest(parse_image(image), ("puller", "wrong-password"))
    assert wrong.status == DENIED and wrong.authenticated


def _docker_config(host, user, password):
    return {"auths": {f"https://{host}/v1/": {"auth": base64.b64encode(f"{user}:{password}".encode()).decode()}}}


@pytest.mark.parametrize(
    "entry", [{"auth": "%%%"}, {"auth": base64.b64encode(b"no-colon").decode()}, {"username": "only-user"}]
)
def test_the_image_check_skips_a_malformed_config_entry(entry):
    """The image check's policy (the base-model pull refuses the same entries: test_oci_units.py)."""
    from components._common.oci_reference import credentials_for

    assert credentials_for({"auths": {"quay.io": entry}}, "quay.io") is None
    assert credentials_for(
        {"auths": {"https://quay.io/v1/": entry, "quay.io": {"username": "u", "password": "p"}}}, "Quay.io"
    ) == ("u", "p")


def test_findings_name_each_missing_image_and_one_warning_per_unreachable_registry(oci_registry, oci_registry_token):
    dead = f"127.0.0.1:{closed_port()}"
    images = [
        f"{oci_registry.host}/models/tiny:1",
        f"{oci_registry.host}/models/absent:1",
        f"{oci_registry_token.host}/models/tiny:1",
        f"{dead}/a/b:1",
        f"{dead}/a/c:1",
    ]
    config = _docker_config(oci_registry_token.host, *oci_registry_token.credentials)
    findings = {finding.images: finding for finding in check_images(images, config)}
    assert findings[(images[0],)].status == FOUND and findings[(images[2],)].status == FOUND
    missing = findings[(images[1],)]
    assert missing.failed and missing.line.startswith(f"image {images[1]}: not found in registry {oci_registry.host}")
    unreachable = findings[(images[3], images[4])]
    assert unreachable.status == UNREACHABLE and not unreachable.failed
    assert unreachable.line.startswith(f"registry {dead} cannot be reached from here")
    password = oci_registry_token.credentials[1]
    assert all(password not in finding.line for finding in findings.values())


def test_a_registry_that_never_answers_ends_at_the_deadline():
    with socket.socket() as silent:  # accepts connections (the backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        started = time.monotonic()
        [finding] = check_images([f"127.0.0.1:{silent.getsockname()[1]}/a/b:1"], deadline_seconds=1.0)
        assert time.monotonic() - started < 3
    assert finding.status == UNREACHABLE and "timed out" in finding.line


def test_compile_names_a_missing_image_and_its_fix(oci_registry, image_check_on, tmp_path, capsys):
    missing = f"{oci_registry.host}/kfp-finetune/absent:0.1.0"
    output = tmp_path / "sft.yaml"
    assert main(["compile", "sft-minimal", "-o", str(output), "--image", missing]) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert errors == [
        f"kfp-finetune compile: error: image {missing}: not found in registry {oci_registry.host} (HTTP 404): "
        + fix_for(parse_image(missing))
    ]
    assert output.is_file()  # written: the image may be built next
    assert main(["compile", "sft-minimal", "-o", str(output), "--image", missing, "--no-image-check"]) == 0
    present = f"{oci_registry.host}/models/tiny:1"
    assert main(["compile", "sft-minimal", "-o", str(output), "--image", present]) == 0
    assert "error" not in capsys.readouterr().err


def test_compile_offline_warns_once_per_registry_and_succeeds(image_check_on, tmp_path, capsys):
    dead = f"127.0.0.1:{closed_port()}/kfp-finetune/kfp-finetune:0.1.0"
    assert main(["compile", "sft-minimal", "-o", str(tmp_path / "x.yaml"), "--image", dead]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning:" in line]
    assert len(warnings) == 1 and dead in warnings[0] and "cannot be reached" in warnings[0]


def test_upload_and_run_send_nothing_when_an_image_is_missing(oci_registry, image_check_on, kfp_api_stub, capsys):
    missing = f"{oci_registry.host}/kfp-finetune/absent:0.1.0"
    for command in ("upload", "run"):
        assert main([command, "sft-minimal", "--host", kfp_api_stub.url, "--image", missing]) == 1
        err = capsys.readouterr().err
        assert f"image {missing}: not found" in err and "nothing sent" in err
    assert kfp_api_stub.requests == []


def test_a_pull_secret_file_answers_the_token_realm(oci_registry_token, image_check_on, tmp_path, capsys):
    image = f"{oci_registry_token.host}/models/tiny:1"
    secret = tmp_path / "config.json"
    argv = ["compile", "sft-minimal", "-o", str(tmp_path / "x.yaml"), "--image", image]
    assert main(argv) == 1
    assert "refuses an anonymous pull" in capsys.readouterr().err
    secret.write_text(json.dumps(_docker_config(oci_registry_token.host, *oci_registry_token.credentials)))
    assert main([*argv, "--pull-secret-file", str(secret)]) == 0
    assert oci_registry_token.credentials[1] not in capsys.readouterr().err


def _spec(*images):
    executors = {f"exec-{i}": {"container": {"image": image}} for i, image in enumerate(images)}
    return {"deploymentSpec": {"executors": executors}}


def _image_stream(name, tag, image="", source=""):
    spec = {"tags": [{"name": tag, "from": {"kind": "DockerImage", "name": source}}]} if source else {}
    status = (
        {"tags": [{"tag": tag, "items": [{"image": image, "dockerImageReference": f"x@{image}"}]}]} if image else {}
    )
    return {
        "apiVersion": "image.openshift.io/v1",
        "kind": "ImageStream",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
        "status": status,
    }


def test_doctor_finds_an_image_stream_built_in_the_namespace(kube_api, image_check_on):
    kube_api.serve("image.openshift.io/v1/imagestreams")
    built = f"{INTERNAL_REGISTRY}/{NS}/kfp-finetune:0.1.0"
    not_built = f"{INTERNAL_REGISTRY}/{NS}/other:1"
    digest = "sha256:" + "b" * 64
    kube_api.custom.create_namespaced_custom_object(
        "image.openshift.io", "v1", NS, "imagestreams", _image_stream("kfp-finetune", "0.1.0", digest)
    )
    checks = check_images_in_namespace(Cluster(kube_api.api_client, NS), _spec(built, not_built), None)
    assert [check.status for check in checks] == ["OK", "FAIL"], checks
    assert digest in checks[0].what and "ImageStream 'kfp-finetune'" in checks[0].what
    assert "no ImageStream 'other'" in checks[1].what
    assert "oc new-build --binary --strategy=docker --name other" in checks[1].remedy


def test_doctor_pulls_with_the_pipeline_service_accounts_pull_secret(kube_api, oci_registry_token, image_check_on):
    image = f"{oci_registry_token.host}/models/tiny:1"
    cluster = Cluster(kube_api.api_client, NS)
    [refused] = check_images_in_namespace(cluster, _spec(image), None)
    assert refused.status == "FAIL" and "refuses an anonymous pull" in refused.what
    config = json.dumps(_docker_config(oci_registry_token.host, *oci_registry_token.credentials))
    kube_api.core.create_namespaced_secret(
        NS,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "quay-pull", "namespace": NS},
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(config.encode()).decode()},
        },
    )
    kube_api.core.create_namespaced_service_account(
        NS,
        {"metadata": {"name": "pipeline-runner-dspa", "namespace": NS}, "imagePullSecrets": [{"name": "quay-pull"}]},
    )
    [pulled] = check_images_in_namespace(cluster, _spec(image), None)
    assert pulled.status == "OK" and "pull secret(s) quay-pull" in pulled.what, pulled
    assert oci_registry_token.credentials[1] not in pulled.line()


def test_doctor_accepts_an_image_stream_that_imported_an_external_image(kube_api, image_check_on):
    kube_api.serve("image.openshift.io/v1/imagestreams")
    image = f"127.0.0.1:{closed_port()}/kfp-finetune/kfp-finetune:0.1.0"
    stream = _image_stream("kfp-finetune", "0.1.0", "sha256:" + "c" * 64, source=image)
    kube_api.custom.create_namespaced_custom_object("image.openshift.io", "v1", NS, "imagestreams", stream)
    [check] = check_images_in_namespace(Cluster(kube_api.api_client, NS), _spec(image), None)
    assert check.status == "OK" and "imported by ImageStream kfp-finetune:0.1.0" in check.what


def test_doctor_reports_a_missing_step_image_in_its_images_area(
    kube_api, oci_registry, image_check_on, monkeypatch, capsys
):
    from components._common import kube_auth

    monkeypatch.setenv(kube_auth.SERVER_URL_ENV, kube_api.url)
    monkeypatch.setenv(kube_auth.AUTH_TOKEN_ENV, "doctor-test-token")
    missing = f"{oci_registry.host}/kfp-finetune/absent:0.1.0"
    code = main(["doctor", "osft-minimal", "--namespace", NS, "--image", missing, "--json"])
    report = json.loads(capsys.readouterr().out)
    [image] = [check for check in report["checks"] if check["area"] == "images"]
    assert code == 1 and image["status"] == "FAIL" and image["what"].startswith(f"image {missing}: not found")
    doctor = ["doctor", "osft-minimal", "--namespace", NS, "--image", missing, "--json"]
    assert main([*doctor, "--no-image-check"]) in (0, 1)
    assert all(check["area"] != "images" for check in json.loads(capsys.readouterr().out)["checks"])


_IMAGE = re.compile(r"^[a-z0-9.-]+\.[a-z]+(?::\d+)?/[a-z0-9._/-]+(?::[A-Za-z0-9_.-]+|@sha256:[0-9a-f]{64})$")


def _image_strings(node):
    """Every string value of the YAML that is shaped like a registry image (descriptions left out)."""
    if isinstance(node, dict):
        for name, value in node.items():
            if name != "description":
                yield from _image_strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _image_strings(value)
    elif isinstance(node, str) and _IMAGE.match(node):
        yield node


def test_images_lists_every_image_the_compiled_pipelines_name(shipped_pipeline_yamls, capsys):
    paths = [str(path) for path in shipped_pipeline_yamls.values()]
    assert main(["images", *paths, "--format", "list", "--no-runtimes"]) == 0
    listed = capsys.readouterr().out.split()
    named = set()
    for path in paths:
        document = next(yaml.safe_load_all(open(path)))
        named |= set(_image_strings(document))
        named |= {e["container"]["image"] for e in document["deploymentSpec"]["executors"].values()}
    assert named and named <= set(listed), named - set(listed)
    assert STEP_IMAGE in listed and "docker.io/vllm/vllm-openai:v0.11.0" in listed
    assert main(["images", *paths]) == 0
    imageset = yaml.safe_load(capsys.readouterr().out)
    assert (imageset["kind"], imageset["apiVersion"]) == ("ImageSetConfiguration", "mirror.openshift.io/v2alpha1")
    names = [entry["name"] for entry in imageset["mirror"]["additionalImages"]]
    assert set(listed) <= set(names) and "quay.io/modh/training:py312-cuda128-torch280" in names


def test_images_pins_the_digests_the_registry_gives(oci_registry, tmp_path, capsys):
    image = f"{oci_registry.host}/models/tiny:1"
    assert main(["images", "sft-minimal", "--image", image, "--resolve-digests", "--no-runtimes"]) == 0
    imageset = yaml.safe_load(capsys.readouterr().out)
    names = [entry["name"] for entry in imageset["mirror"]["additionalImages"]]
    assert f"{oci_registry.host}/models/tiny@{oci_registry.digests['models/tiny:1']}" in names
