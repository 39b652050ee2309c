"""``kfp-finetune doctor`` lists the Hardware Profiles and which steps each fits, and checks the run's choices."""

import pytest

from components._common.tests.test_hardware_profiles import DISABLED_PROFILE, NODE_PROFILE, QUEUE_PROFILE
from pipelines.cli import main
from tests.test_doctor import NS, S3_DATASET, dash, problems
from tests.test_doctor import cluster as cluster  # noqa: F401 - the fixture, used by name


@pytest.fixture(scope="module")
def sft_yaml(default_settings_yamls):
    """The expert SFT pipeline (it exposes the hardware profiles), the session's compile."""
    return default_settings_yamls["sft"]


@pytest.fixture
def profiled(cluster):  # noqa: F811 - the imported fixture
    for profile in (NODE_PROFILE, QUEUE_PROFILE, DISABLED_PROFILE):
        body = {**profile, "metadata": {**profile["metadata"], "namespace": NS}}
        cluster.custom.create_namespaced_custom_object(
            "infrastructure.opendatahub.io", "v1", NS, "hardwareprofiles", body
        )
    return cluster


def _doctor(capsys, sft_yaml, model, *args):
    base = ["--param", f"{dash('train', 'training_base_model')}={model}"]
    code = main(["doctor", str(sft_yaml), "--namespace", NS, *base, *S3_DATASET, *args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_doctor_lists_each_profile_and_the_steps_it_fits(profiled, capsys, sft_yaml, tiny_model_dir):
    code, out = _doctor(capsys, sft_yaml, tiny_model_dir)
    lines = [line for line in out.splitlines() if "hardware profile" in line]
    assert any("a100-queued (team)" in line and "fits training, evaluation, serving" in line for line in lines), out
    assert any(
        "a100 (team)" in line and "fits training, serving" in line and "not evaluation: eval_backend=lmevaljob" in line
        for line in lines
    ), out
    assert any("old-gpus" in line and "DISABLED" in line and "fits no step" in line for line in lines), out


def test_a_missing_chosen_profile_fails_listing_the_enabled_ones(profiled, capsys, sft_yaml, tiny_model_dir):
    choice = ["--param", f"{dash('train', 'training_hardware_profile')}=h100"]
    code, out = _doctor(capsys, sft_yaml, tiny_model_dir, *choice)
    failed = [line for line in problems(out) if "HardwareProfile h100 does not exist" in line]
    assert code == 1 and len(failed) == 1, out
    assert "a100, a100-queued" in out


def test_no_profiles_and_none_chosen_prints_nothing(cluster, capsys, sft_yaml, tiny_model_dir):  # noqa: F811
    code, out = _doctor(capsys, sft_yaml, tiny_model_dir)
    assert "hardware" not in out.lower(), out
