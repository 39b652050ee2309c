"""Orthogonal Subspace Fine-Tuning (OSFT, Nayak et al., arXiv:2504.07097) with mini-trainer's implementation.

Training Hub's OSFT backend, ``rhai-innovation-mini-trainer``, builds the model (:func:`load_osft_model`: each target
weight ``W = U S Vᵀ`` split into its frozen top ``k`` singular directions and the trained rest, ``k =
floor(min(out, in) * (1 - unfreeze_rank_ratio))``), projects the gradients before and the parameters after each
optimizer step (its ``optim_wrapper``, installed by :class:`ProjectionCallback`), and folds the factors back into
dense weights for saving (:func:`plain_model`). This module only connects it to ``transformers.Trainer``.
"""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback


def load_osft_model(model_source: str, unfreeze_rank_ratio: float) -> Any:
    """The causal LM at ``model_source`` as mini-trainer's OSFT model (float32, factors initialised)."""
    import torch
    from mini_trainer.osft_utils import create_osft_model_class
    from mini_trainer.utils import get_model_class_from_config

    osft_class = create_osft_model_class(get_model_class_from_config(str(model_source)))
    return osft_class.from_pretrained(
        str(model_source), rank_ratio=1.0 - unfreeze_rank_ratio, initialize_osft=True, dtype=torch.float32
    )


class ProjectionCallback(TrainerCallback):
    """Wraps the Trainer's optimizer with mini-trainer's projections (gradients before, parameters after a step)."""

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        """Installs the projections on the optimizer the Trainer prepared (the inner one when accelerate wraps it)."""
        from mini_trainer.osft_utils import optim_wrapper

        optim_wrapper(getattr(optimizer, "optimizer", optimizer), model)


def plain_model(model: Any, state: dict[str, Any]) -> tuple[Any, None]:
    """A plain model of the base class holding the dense weights of the OSFT ``model`` (``state``: its state dict).

    Built on the meta device and given the reconstructed tensors, so no second copy of the weights is allocated.
    """
    import torch

    dense = model.prepare_state_dict_for_save(dict(state))
    base_class = type(model).__mro__[1]  # the class mini-trainer derived the OSFT class from
    with torch.device("meta"):
        plain = base_class(model.config)
    plain.load_state_dict(dense, strict=False, assign=True)
    plain.tie_weights()
    plain.config.architectures = [base_class.__name__]
    return plain, None
