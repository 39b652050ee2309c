"""Resumable checkpoints of Training Hub's backends: the newest complete one of each layout (:data:`LAYOUTS`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

#: What transformers writes into a checkpoint directory while a JIT checkpoint is being saved.
HF_INCOMPLETE_MARKER = "checkpoint-is-incomplete.txt"
#: Per algorithm: (directory pattern under ckpt_output_dir, file that marks it complete, Training Hub kwarg or "").
LAYOUTS: dict[str, tuple[str, str, str]] = {
    "sft": (r"full_state/epoch_(\d+)", "", ""),
    "osft": (r"full_state_checkpoints/step_(\d+)", "training_state.pt", "resume_from_full_state_checkpoint"),
    "lora": (r"checkpoint-(\d+)", "trainer_state.json", ""),
}


def _complete(directory: Path, marker: str) -> bool:
    if (directory / HF_INCOMPLETE_MARKER).exists():
        return False
    if marker:
        return (directory / marker).is_file()
    return any(directory.iterdir())


def newest_complete_checkpoint(algorithm: str, ckpt_dir: Path) -> Path | None:
    """The complete checkpoint of ``algorithm``'s layout under ``ckpt_dir`` with the highest number (None: none)."""
    pattern, marker, _ = LAYOUTS[algorithm]
    parent_pattern, _, leaf = pattern.rpartition("/")
    parent = Path(ckpt_dir) / parent_pattern if parent_pattern else Path(ckpt_dir)
    if not parent.is_dir():
        return None
    found = []
    for child in parent.iterdir():
        match = re.fullmatch(leaf, child.name)
        if match and child.is_dir() and _complete(child, marker):
            found.append((int(match.group(1)), child))
    return max(found)[1] if found else None


def resume_kwargs(algorithm: str, ckpt_dir: Path, resume: bool) -> tuple[dict[str, Any], str]:
    """``(keywords resuming from the newest complete checkpoint, one line saying so)``; ``({}, "")`` without."""
    if not resume or algorithm not in LAYOUTS:  # GRPO: verl and ART resume from their own state in ckpt_dir
        return {}, ""
    checkpoint = newest_complete_checkpoint(algorithm, ckpt_dir)
    if checkpoint is None:
        return {}, ""
    keyword = LAYOUTS[algorithm][2]
    if keyword:
        return {keyword: str(checkpoint)}, f"resuming {algorithm} from {checkpoint} ({keyword})"
    if algorithm == "sft":
        return {}, f"resuming sft: instructlab-training loads the newest state itself ({checkpoint})"
    return {}, (
        f"found {checkpoint}, but training-hub's lora_sft takes no resume argument: LoRA restarts from the base model"
    )
