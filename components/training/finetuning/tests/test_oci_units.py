"""``oci://`` references, the pull secret's config.json, parameter validation and lineage keys (no network)."""

import base64
import json

import pytest

from components._common.oci_reference import OciReference, credentials_for
from components.training.finetuning.contract import TrainingConfigError
from components.training.finetuning.oci.client import OciModelError, parse_oci_uri, pull_credentials
from components.training.finetuning.run import validate_request
from tests.harness.requests import train_model_request

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("oci://quay.io/org/granite:1.0", OciReference("quay.io", "org/granite", "1.0", "")),
        ("oci://127.0.0.1:5000/models/tiny:1", OciReference("127.0.0.1:5000", "models/tiny", "1", "")),
        ("oci://registry.local/a/b/c", OciReference("registry.local", "a/b/c", "latest", "")),
        (f"oci://quay.io/org/m@{DIGEST}", OciReference("quay.io", "org/m", "", DIGEST)),
        (f"oci://quay.io/org/m:v2@{DIGEST}", OciReference("quay.io", "org/m", "v2", DIGEST)),
        ("oci://reg.svc.cluster.local:5000/my_team/model-x:2024.1", None),
    ],
)
def test_references_parse(uri, expected):
    ref = parse_oci_uri(uri)
    if expected:
        assert ref == expected
    assert ref.uri(DIGEST) == f"oci://{ref.registry}/{ref.repository}@{DIGEST}"


@pytest.mark.parametrize(
    "uri",
    [
        "oci://quay.io",
        "oci://quay.io/Org/Model:1",
        "oci://quay.io/org/model:bad tag",
        "oci://quay.io/org/model@sha256:abc",
        "oci:///org/model:1",
        "oci://quay.io//model:1",
    ],
)
def test_bad_references_fail_with_the_expected_form(uri):
    with pytest.raises(OciModelError, match=r"not a valid OCI reference; expected oci://<registry>\[:port\]/"):
        parse_oci_uri(uri)


def test_credentials_from_a_config_json():
    basic = base64.b64encode(b"robot$team:p@ss:word").decode()
    config = {
        "auths": {
            "https://quay.io/v1/": {"auth": basic},
            "registry.local:5000": {"username": "u", "password": "p"},
            "https://index.docker.io/v1/": {"auth": base64.b64encode(b"hub:pw").decode()},
        }
    }
    assert credentials_for(config, "quay.io") == ("robot$team", "p@ss:word")  # ':' in the password kept
    assert credentials_for(config, "registry.local:5000") == ("u", "p")
    assert credentials_for(config, "docker.io") == ("hub", "pw")
    assert credentials_for(config, "ghcr.io") is None
    assert credentials_for({"quay.io": {"auth": basic}}, "quay.io") == ("robot$team", "p@ss:word")  # .dockercfg
    assert credentials_for(None, "quay.io") is None


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"auth": "%%%not-base64"}, "'auth' is not base64 of 'user:password'"),
        ({"auth": base64.b64encode(b"no-colon-SECRETVALUE").decode()}, "decodes to no 'user:password' pair"),
        ({"username": "only-user"}, "needs 'auth' .* or 'username' and 'password'"),
    ],
)
def test_malformed_entries_name_the_host_and_key_but_never_the_value(entry, message):
    env = {"OCI_PULL_SECRET_MODEL_DOWNLOAD": json.dumps({"auths": {"quay.io": entry}})}
    with pytest.raises(OciModelError, match=message) as caught:
        pull_credentials(env, "quay.io")
    text = str(caught.value)
    assert "auths['quay.io'] in OCI_PULL_SECRET_MODEL_DOWNLOAD" in text and "oci-pull-secret-model-download" in text
    assert "SECRETVALUE" not in text and "%%%" not in text


def test_the_secret_env_var_the_guide_names_wins_over_dockerconfigjson():
    guide = json.dumps({"auths": {"quay.io": {"username": "guide", "password": "p"}}})
    dockerconfigjson = json.dumps({"auths": {"quay.io": {"username": "dockerconfigjson", "password": "p"}}})
    env = {"OCI_PULL_SECRET_MODEL_DOWNLOAD": guide, "OCI_PULL_SECRET_DOCKERCONFIGJSON": dockerconfigjson}
    assert pull_credentials(env, "quay.io") == (("guide", "p"), "OCI_PULL_SECRET_MODEL_DOWNLOAD")
    env["OCI_PULL_SECRET_MODEL_DOWNLOAD"] = " "
    assert pull_credentials(env, "quay.io") == (("dockerconfigjson", "p"), "OCI_PULL_SECRET_DOCKERCONFIGJSON")
    assert pull_credentials({}, "quay.io") == (None, "")
    with pytest.raises(OciModelError, match=r"OCI_PULL_SECRET_MODEL_DOWNLOAD .*: not a Docker config.json") as caught:
        pull_credentials({"OCI_PULL_SECRET_MODEL_DOWNLOAD": '{"auths": "SECRETVALUE'}, "quay.io")
    assert "SECRETVALUE" not in str(caught.value)


def test_validate_request_checks_the_reference_and_the_tls_options_before_anything_runs():
    def request(**arguments):
        return train_model_request(training_launcher="local", **arguments)

    ok = validate_request(request(training_base_model="oci://quay.io/org/granite:1"), False)
    assert ok.base_model == "oci://quay.io/org/granite:1"
    with pytest.raises(
        TrainingConfigError, match="train_model parameter training_base_model='oci://quay.io/Org/X': not a valid"
    ):
        validate_request(request(training_base_model="oci://quay.io/Org/X"), False)
    with pytest.raises(TrainingConfigError, match="training_oci_insecure=True and training_oci_ca_bundle: contradict"):
        validate_request(
            request(training_base_model="m", training_oci_insecure=True, training_oci_ca_bundle="/ca.pem"), False
        )
