"""``training_gradient_checkpointing``: local launcher and transformers backend follow it; Training Hub notes False."""

import pytest
import torch

from components.training.finetuning import contract
from components.training.finetuning.contract import TrainingConfigError
from components.training.finetuning.local import trainer as local_trainer
from components.training.finetuning.run import validate_request
from tests.harness.requests import train_model_request, training_config

torch.set_num_threads(1)

FAST = {"effective_batch_size": 8, "max_seq_len": 256, "max_tokens_per_gpu": 1024, "max_steps": 3, "num_epochs": 1}


@pytest.mark.parametrize(("algorithm", "extra"), [("sft", {}), ("lora", {"lora_r": 4})])
def test_local_training_is_the_same_with_and_without_checkpointing(
    algorithm, extra, tiny_model_dir, demo_dataset_path, tmp_path, monkeypatch
):
    """Recomputing activations changes memory, not the maths: identical losses, and it is really switched on."""
    from transformers import Trainer

    trained_with = []
    train = Trainer.train

    def recording_train(self, *args, **kwargs):
        output = train(self, *args, **kwargs)
        trained_with.append(self.model.is_gradient_checkpointing)
        return output

    monkeypatch.setattr(Trainer, "train", recording_train)
    losses = {}
    for enabled in (True, False):
        config = training_config(
            base_model=str(tiny_model_dir), algorithm=algorithm, gradient_checkpointing=enabled, **FAST, **extra
        )
        result = local_trainer.train_locally(config, demo_dataset_path, tmp_path / str(enabled), log=lambda _: None)
        losses[enabled] = [record["loss"] for record in result.records]
    assert len(losses[True]) == 3 and trained_with == [True, False]
    assert losses[True] == pytest.approx(losses[False], rel=1e-5)


def test_training_hub_launchers_accept_turning_it_off_with_one_note():
    """The guide's "Adding New Runtime Parameters" example with False: accepted everywhere, noted where it is moot."""

    def request(**changes):
        arguments = {
            "training_base_model": "m",
            "training_algorithm": "osft",
            "training_launcher": "trainjob",
            "training_gradient_checkpointing": False,
        }
        return train_model_request(**{**arguments, **changes})

    for algorithm in ("sft", "osft", "lora"):
        config = validate_request(request(training_algorithm=algorithm), has_eval_data=False)
        assert config.gradient_checkpointing is False  # it reaches the run config as given
        [note] = contract.ignored_settings(config.hyperparameters())
        assert note.startswith("note: training_gradient_checkpointing=False has no effect on Training Hub"), note
    assert (
        contract.ignored_settings(
            validate_request(request(training_gradient_checkpointing=True), False).hyperparameters()
        )
        == []
    )
    assert not validate_request(request(training_launcher="local"), has_eval_data=False).gradient_checkpointing
    # The transformers backend follows the setting in the pods too.
    assert not validate_request(request(training_backend="transformers"), has_eval_data=False).gradient_checkpointing
    with pytest.raises(TrainingConfigError, match="training_gradient_checkpointing='yes': must be of type bool"):
        validate_request(request(training_gradient_checkpointing="yes"), has_eval_data=False)
