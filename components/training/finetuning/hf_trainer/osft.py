"""Orthogonal Subspace Fine-Tuning (OSFT) on CPU, after Nayak et al., arXiv:2504.07097.

Each target weight ``W = U S Vᵀ`` is split by its singular values: the top ``k`` directions (``U_high``, ``S_high``,
``V_high``) are frozen, the rest (``U_low``, ``S_low``, ``V_low``) are trained. Gradients of ``U_low``/``V_low`` are
projected onto the orthogonal complement of ``U_high``/``V_high`` before each step, and, because Adam's element-wise
update does not preserve that, the parameters are projected again after each step. The frozen part of ``W`` is
therefore exactly preserved: ``U_highᵀ W' V_high = diag(S_high)`` for the trained ``W'``.

``k = floor(min(out, in) * (1 - unfreeze_rank_ratio))``, capped at ``min(out, in) - 1``, and the default target
modules are the attention and MLP projections, both as in Training Hub's OSFT backend (``mini-trainer``), whose own
model code needs CUDA/FSDP. :func:`merge_osft` folds the factors back into plain ``nn.Linear`` weights so the saved
model is an ordinary Hugging Face checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

#: Module name suffixes decomposed by default (same set as mini-trainer's default OSFT patterns).
DEFAULT_TARGET_PATTERNS = (
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
)


def frozen_rank(shape: Sequence[int], unfreeze_rank_ratio: float) -> int:
    """The number of top singular directions frozen for a weight of ``shape``.

    Args:
        shape: ``(out_features, in_features)``.
        unfreeze_rank_ratio: Fraction of the rank that is trained, in (0, 1].

    Returns:
        ``floor(min(shape) * (1 - unfreeze_rank_ratio))`` capped at ``min(shape) - 1`` (at least one direction is
        always trained).
    """
    if not 0 < unfreeze_rank_ratio <= 1:
        raise ValueError(f"unfreeze_rank_ratio={unfreeze_rank_ratio!r}: must be in (0, 1]")
    full_rank = min(shape)
    return min(int(math.floor(full_rank * (1 - unfreeze_rank_ratio))), full_rank - 1)


def _osft_linear_class():
    import torch
    from torch import nn

    class OSFTLinear(nn.Module):
        """A linear layer whose weight is ``U_high S_high V_highᵀ`` (frozen) + ``U_low S_low V_lowᵀ`` (trained)."""

        def __init__(self, linear: nn.Linear, top_k: int):
            super().__init__()
            weight = linear.weight.detach().to(torch.float64)
            u, s, vh = torch.linalg.svd(weight, full_matrices=False)
            dtype = linear.weight.dtype
            self.in_features, self.out_features = linear.in_features, linear.out_features
            self.register_buffer("U_high", u[:, :top_k].to(dtype).contiguous())
            self.register_buffer("S_high", s[:top_k].to(dtype).contiguous())
            self.register_buffer("V_high", vh[:top_k].to(dtype).contiguous())
            self.U_low = nn.Parameter(u[:, top_k:].to(dtype).contiguous())
            self.S_low = nn.Parameter(s[top_k:].to(dtype).contiguous())
            self.V_low = nn.Parameter(vh[top_k:].to(dtype).contiguous())
            self.bias = linear.bias

        def weight(self) -> torch.Tensor:
            high = (self.U_high * self.S_high) @ self.V_high
            return high + (self.U_low * self.S_low) @ self.V_low

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return nn.functional.linear(x, self.weight(), self.bias)

        @torch.no_grad()
        def project_gradients(self) -> None:
            """Removes the components of the ``U_low``/``V_low`` gradients that lie in the frozen subspace."""
            if self.U_low.grad is not None:
                self.U_low.grad.sub_(self.U_high @ (self.U_high.T @ self.U_low.grad))
            if self.V_low.grad is not None:
                self.V_low.grad.sub_((self.V_low.grad @ self.V_high.T) @ self.V_high)

        @torch.no_grad()
        def project_parameters(self) -> None:
            """Keeps ``U_low``/``V_low`` orthogonal to the frozen directions after an optimizer step."""
            self.U_low.sub_(self.U_high @ (self.U_high.T @ self.U_low))
            self.V_low.sub_((self.V_low @ self.V_high.T) @ self.V_high)

    return OSFTLinear


def _replace_module(model: Any, name: str, module: Any) -> None:
    parent_name, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent_name) if parent_name else model, child, module)


def attach_osft(
    model: Any, unfreeze_rank_ratio: float, target_patterns: Sequence[str] = DEFAULT_TARGET_PATTERNS
) -> dict[str, int]:
    """Replaces every target ``nn.Linear`` of ``model`` by its OSFT decomposition, in place.

    Other parameters (embeddings, norms) stay trainable, as in mini-trainer.

    Args:
        model: A ``torch.nn.Module`` (e.g. a Hugging Face causal LM).
        unfreeze_rank_ratio: Fraction of each target matrix's rank that is trained, in (0, 1].
        target_patterns: A module is a target when its name ends with one of these.

    Returns:
        Frozen rank ``k`` by module name.

    Raises:
        ValueError: No module matches ``target_patterns``.
    """
    from torch import nn

    osft_linear = _osft_linear_class()
    targets = [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and any(name.endswith(pattern) for pattern in target_patterns)
    ]
    if not targets:
        raise ValueError(f"no nn.Linear module of {type(model).__name__} matches the OSFT targets {target_patterns}")
    ranks = {}
    for name, module in targets:
        ranks[name] = frozen_rank(module.weight.shape, unfreeze_rank_ratio)
        _replace_module(model, name, osft_linear(module, ranks[name]))
    return ranks


def osft_modules(model: Any) -> dict[str, Any]:
    """The OSFT layers of ``model`` by name."""
    return {name: module for name, module in model.named_modules() if hasattr(module, "project_parameters")}


def project_gradients(model: Any) -> None:
    """Projects the gradients of every OSFT layer (call after ``backward``, before ``optimizer.step``)."""
    for module in osft_modules(model).values():
        module.project_gradients()


def project_parameters(model: Any) -> None:
    """Re-orthogonalises every OSFT layer's trained factors (call after ``optimizer.step``)."""
    for module in osft_modules(model).values():
        module.project_parameters()


def merge_osft(model: Any) -> None:
    """Folds every OSFT layer back into a plain ``nn.Linear`` with the current weight, in place.

    Args:
        model: A model prepared by :func:`attach_osft`.
    """
    import torch
    from torch import nn

    for name, module in osft_modules(model).items():
        with torch.no_grad():
            weight = module.weight()
            linear = nn.Linear(module.in_features, module.out_features, bias=module.bias is not None)
            linear = linear.to(dtype=weight.dtype, device=weight.device)
            linear.weight.copy_(weight)
            if module.bias is not None:
                linear.bias = module.bias
        _replace_module(model, name, linear)
