"""The pod command's view of the installed Training Hub (:mod:`.pod.hub_compat`), on stand-in signatures."""

from __future__ import annotations

import platform

import pytest

from components.training.finetuning.pod import hub_compat


def test_the_version_line_names_the_training_hub_stack_and_python():
    versions = hub_compat.installed_versions()
    assert versions["training-hub"] == hub_compat.NEWEST_TESTED  # the main environment's pin
    line = hub_compat.version_line(versions)
    assert line.startswith(f"training-hub {hub_compat.NEWEST_TESTED} (instructlab-training ")
    assert line.endswith(f"Python {platform.python_version()})")
    assert hub_compat.version_line({"training-hub": "", "torch": "2.8.0"}).startswith(
        "training-hub is not installed (torch 2.8.0, Python "
    )


def test_an_option_the_release_lacks_is_left_out_with_one_note_naming_version_and_remedy():
    def sft(model_path, data_path, num_epochs=1):  # a release without enable_jit_checkpoint and mlflow_*
        return num_epochs

    notes = []
    kwargs = {"model_path": "m", "data_path": "d", "enable_jit_checkpoint": True, "mlflow_run_name": "r"}
    selected = hub_compat.select_keywords("sft", sft, kwargs, "0.3.0", notes.append)
    assert selected == {"model_path": "m", "data_path": "d"}
    assert len(notes) == 2
    assert notes[0].startswith("note: training-hub 0.3.0 sft does not take enable_jit_checkpoint: running without ")
    assert "training-hub >= 0.11.0" in notes[0] and "training_backend='transformers'" in notes[0]
    assert "mlflow_run_name: running without MLflow tracking" in notes[1] and "training-hub >= 0.6.0" in notes[1]


def test_a_training_setting_the_release_lacks_is_one_error_line_never_a_type_error():
    def osft(model_path, data_path):
        return model_path

    with pytest.raises(hub_compat.TrainingHubUnsupported) as error:
        hub_compat.select_keywords("osft", osft, {"model_path": "m", "data_path": "d", "max_steps": 10}, "0.2.0")
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("training-hub 0.2.0 in this runtime's image: osft does not take max_steps=10 ")
    assert "training_backend='transformers'" in message


def test_a_missing_algorithm_names_the_release_it_arrived_in():
    message = hub_compat.missing_function_message("0.3.0", "lora_sft")
    assert message.startswith("training-hub 0.3.0 in this runtime's image has no lora_sft (lora_sft arrived in ")
    assert "training-hub >= 0.4.0" in message and "\n" not in message
    assert hub_compat.missing_function_message("", "sft").startswith("this runtime's image has no training-hub")


def test_a_function_whose_keywords_cannot_be_told_gets_every_keyword_with_a_note():
    def embedding_sft(model_path, **kwargs):  # a function whose backend's keys this module cannot read
        return kwargs

    def sft(**kwargs):  # no named parameter: not a Training Hub release's signature
        return kwargs

    notes = []
    kwargs = {"model_path": "m", "anything": 1}
    assert hub_compat.select_keywords("embedding_sft", embedding_sft, kwargs, "9.9", notes.append) == kwargs
    assert hub_compat.select_keywords("sft", sft, kwargs, "9.9", notes.append) == kwargs
    assert notes == [
        f"note: cannot tell which keywords training-hub 9.9 {name} takes; passing them all"
        for name in ("embedding_sft", "sft")
    ]


def test_a_release_environment_skips_only_with_the_set_ups_reason(tmp_path):
    from tests.harness.training_hub_envs import hub_env

    (tmp_path / "0.3.0.unavailable").write_text("Python 3.12 is not installed (training-hub 0.3.0 needs it)\n")
    with pytest.raises(pytest.skip.Exception, match="0.3.0: the set-up could not build .*Python 3.12 is not installed"):
        hub_env("0.3.0", tmp_path)
    with pytest.raises(pytest.fail.Exception, match="0.6.0: .* is missing; run `bash scripts/setup.sh --test`"):
        hub_env("0.6.0", tmp_path)  # no environment and no reason: the set-up did not run
