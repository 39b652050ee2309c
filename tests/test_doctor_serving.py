"""``kfp-finetune doctor`` with the registry step's KServe deploy on: CRDs, permissions, storage (issue 37)."""

import pytest

from components.deployment.kubeflow_model_registry.kserve_deploy import API_PERMISSIONS
from pipelines.cli import main
from tests.test_doctor import NS, S3_DATASET, dash, problems
from tests.test_doctor import cluster as cluster  # noqa: F401 - the fixture, used by name

ISVC = "serving.kserve.io/v1beta1/inferenceservices"
RUNTIMES = "serving.kserve.io/v1alpha1/servingruntimes"


@pytest.fixture(scope="module")
def sft_yaml(default_settings_yamls):
    """The expert SFT pipeline, the session's compile (doctor takes a compiled file as well as a name)."""
    return default_settings_yamls["sft"]


def _doctor(capsys, sft_yaml, kube, *args):
    base = ["--param", f"{dash('train', 'training_base_model')}={kube}"]
    code = main(["doctor", str(sft_yaml), "--namespace", NS, *base, *S3_DATASET, *args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _deploy(modelcar="oci://quay.io/org/tiny:1"):
    settings = (
        f"{dash('registry', 'deploy_inference_service')}=true",
        f"{dash('registry', 'modelcar_uri')}={modelcar}",
    )
    return [word for setting in settings for word in ("--param", setting)]


@pytest.fixture
def kserve_cluster(cluster):  # noqa: F811 - the imported fixture
    cluster.serve(ISVC)
    cluster.serve(RUNTIMES)
    return cluster


def test_deploy_off_checks_nothing_of_kserve(kserve_cluster, capsys, sft_yaml, tiny_model_dir):
    code, out = _doctor(capsys, sft_yaml, tiny_model_dir)
    assert "KServe" not in out and not [r for r in kserve_cluster.requests if r.group == "serving.kserve.io"]


def test_deploy_on_with_kserve_and_every_permission_is_ok(kserve_cluster, capsys, sft_yaml, tiny_model_dir):
    code, out = _doctor(capsys, sft_yaml, tiny_model_dir, *_deploy())
    assert any(
        line.startswith("OK") and "KServe serves InferenceService and ServingRuntime" in line
        for line in out.splitlines()
    ), out
    reviews = [
        r.body["spec"]["resourceAttributes"] for r in kserve_cluster.requests if r.plural == "selfsubjectaccessreviews"
    ]
    reviewed = {(a["group"], a["resource"], a["verb"]) for a in reviews if a.get("group") == "serving.kserve.io"}
    assert reviewed == API_PERMISSIONS


@pytest.mark.parametrize(
    ("scenario", "fragments"),
    [
        ("no-kserve", ["FAIL", "KServe is not installed", "serving.kserve.io/v1beta1 inferenceservices not served"]),
        ("denied", ["FAIL", "may not patch inferenceservices", "rbac.yaml"]),
        ("no-modelcar", ["FAIL", "not published as a modelcar", "oci://registry/repository:tag"]),
    ],
)
def test_each_missing_serving_prerequisite_is_one_line(
    kserve_cluster, capsys, sft_yaml, tiny_model_dir, scenario, fragments
):
    args = _deploy()
    if scenario == "no-kserve":
        kserve_cluster.unserve(ISVC)
    elif scenario == "denied":
        kserve_cluster.deny("serving.kserve.io", "inferenceservices", "patch")
    else:
        args = _deploy(modelcar="")
    code, out = _doctor(capsys, sft_yaml, tiny_model_dir, *args)
    lines = [line for line in problems(out) if any(word in line for word in ("KServe", "kserve", "deploy_inference"))]
    assert code == 1 and len(lines) == 1, out
    assert all(fragment in lines[0] for fragment in fragments), lines
