"""OSFT (arXiv:2504.07097): mini-trainer's model on ``transformers.Trainer``, with our DDP projection (README)."""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback


def load_osft_model(model_path: str, unfreeze_rank_ratio: float) -> Any:
    """The causal LM at ``model_path`` as mini-trainer's OSFT model (float32, factors initialised)."""
    import torch
    from mini_trainer.osft_utils import create_osft_model_class
    from mini_trainer.utils import get_model_class_from_config

    osft_class = create_osft_model_class(get_model_class_from_config(str(model_path)))
    return osft_class.from_pretrained(
        str(model_path), rank_ratio=1.0 - unfreeze_rank_ratio, initialize_osft=True, dtype=torch.float32
    )


class ProjectionCallback(TrainerCallback):
    """Projects the gradients before and the parameters after each optimizer step.

    mini-trainer's ``optim_wrapper``, except for a DDP-replicated model (it sums the product over the ranks).
    """

    def __init__(self, replicated: bool) -> None:
        self.replicated = replicated

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        """Installs the projections on the optimizer the Trainer prepared (the inner one when accelerate wraps it)."""
        inner = getattr(optimizer, "optimizer", optimizer)
        if not self.replicated:
            from mini_trainer.osft_utils import optim_wrapper

            optim_wrapper(inner, model)
            return
        step = inner.step

        def projected_step(*step_args, **step_kwargs):
            _project_replicated(model, gradients=True)
            result = step(*step_args, **step_kwargs)
            _project_replicated(model, gradients=False)
            return result

        inner.step = projected_step


def _project_replicated(model: Any, gradients: bool) -> None:
    """``dU -= U_high U_highᵀ dU`` and ``dV -= dV V_highᵀ V_high`` (of the gradients, else of the factors)."""
    import torch

    with torch.no_grad():
        for module in model.modules():
            if not (hasattr(module, "osft_params") and hasattr(module, "osft_U_high")):  # mini-trainer's own test
                continue
            factors = model.get_svd_dict_for_module(module)
            u_high, v_high = factors["U_high"], factors["V_high"]
            u_low, v_low = factors["U_low"], factors["V_low"]
            u, v = (u_low.grad, v_low.grad) if gradients else (u_low.data, v_low.data)
            if u is not None:
                u.sub_(u_high @ (u_high.T @ u))
            if v is not None:
                v.sub_((v @ v_high.T) @ v_high)


def plain_model(model: Any, state: dict[str, Any]) -> tuple[Any, None]:
    """A plain model of the base class holding the dense weights of the OSFT ``model`` (built on the meta device)."""
    import torch

    dense = model.prepare_state_dict_for_save(dict(state))
    base_class = type(model).__mro__[1]  # the class mini-trainer derived the OSFT class from
    with torch.device("meta"):
        plain = base_class(model.config)
    plain.load_state_dict(dense, strict=False, assign=True)
    plain.tie_weights()
    plain.config.architectures = [base_class.__name__]
    return plain, None
