"""``config.train_model_request``: every ``train_model`` argument lands in one group, under its name less the prefix."""

import dataclasses
import inspect

import pytest

from components.training.finetuning import train_model
from components.training.finetuning.config import OUTPUTS, TrainModelRequest, parameter_fields, train_model_request


def _arguments() -> dict[str, object]:
    """One distinct value per argument of the component, so a value landing under another name shows."""
    return {name: object() for name in inspect.signature(train_model.python_func).parameters}


def test_every_argument_lands_in_one_group_under_its_own_name():
    arguments = _arguments()
    request = train_model_request(arguments)
    assert isinstance(request, TrainModelRequest)
    fields = parameter_fields()
    landed = {
        name: getattr(getattr(request, group) if group else request, field) for name, (group, field) in fields.items()
    }
    assert set(landed) == set(arguments) - set(OUTPUTS)
    assert all(landed[name] is arguments[name] for name in landed)
    grouped = sum(len(dataclasses.fields(getattr(request, group))) for group in {g for g, _ in fields.values() if g})
    assert grouped + len([1 for g, _ in fields.values() if g is None]) == len(fields)  # one place per argument
    assert request.training.num_epochs is arguments["training_num_epochs"]
    assert request.progress.metrics_port is arguments["training_progress_metrics_port"]
    assert request.oci.ca_bundle is arguments["training_oci_ca_bundle"]


def test_outputs_are_the_components_output_artifacts():
    outputs = [name for name, p in inspect.signature(train_model.python_func).parameters.items() if "Output" in str(p)]
    assert sorted(outputs) == sorted(OUTPUTS)


def test_wrapper_hands_its_real_arguments_through(monkeypatch):
    """The component's own body (``dict(locals())`` first) builds the request the run gets, defaults included."""
    seen = {}
    monkeypatch.setattr(
        "components.training.finetuning.run.run_train_model", lambda request, **_: seen.update(r=request)
    )
    train_model.python_func(output_model=None, output_metrics=None, output_loss_chart=None, task_config=None)
    defaults = {n: p.default for n, p in inspect.signature(train_model.python_func).parameters.items()}
    assert seen["r"].training.num_epochs == defaults["training_num_epochs"] == 3
    assert seen["r"].training.base_model == defaults["training_base_model"]


@pytest.mark.parametrize("change", ["missing", "unknown"])
def test_a_mismatch_is_one_line_naming_the_argument(change):
    arguments = _arguments()
    if change == "missing":
        del arguments["training_seed"]
    else:
        arguments["training_sead"] = 1
    with pytest.raises(TypeError) as raised:
        train_model_request(arguments)
    message = str(raised.value)
    assert "\n" not in message and message.startswith("train_model: ")
    assert ("'training_seed'" if change == "missing" else "'training_sead'") in message
