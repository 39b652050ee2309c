"""``training_backend="transformers"`` on a cluster: the project's trainer under ``torchrun`` in the job's pods."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components._common.chat_format import iter_chat_file
from components.training.finetuning.contract import POD_MODULES, settings_not_supported
from components.training.finetuning.staging import module_file, stage_code_tree

CODE_DIR = "transformers"  # in the run directory
#: The modules the pods import, copied at their package paths.
STAGED_MODULES = (
    *POD_MODULES,
    "components._common.files",
    "components._common.masking",
    "components.training.finetuning.hf_trainer.callbacks",
    "components.training.finetuning.hf_trainer.data",
    "components.training.finetuning.hf_trainer.osft",
    "components.training.finetuning.hf_trainer.pod_launch",
    "components.training.finetuning.hf_trainer.preemption",
    "components.training.finetuning.hf_trainer.training",
    "components.training.finetuning.tracking",
)
#: The pod command and the torchrun worker, at the root of the code tree.
ROOT_SCRIPTS = {
    "launch.py": "components.training.finetuning.hf_trainer.pod_launch",
    "worker.py": "components.training.finetuning.hf_trainer.pod_launch",
}
#: Settings this backend cannot honour: (parameter, the only accepted value, why).
UNSUPPORTED_SETTINGS = (("use_liger", False, "Liger kernels are Training Hub's (instructlab-training, mini-trainer)"),)


def unsupported_settings(hyperparameters: Mapping[str, Any]) -> list[str]:
    """One message per setting the ``transformers`` backend would not apply (empty when all apply)."""
    return settings_not_supported(UNSUPPORTED_SETTINGS, hyperparameters, "training_backend='transformers'")


def stage_code(run_dir: Path) -> Path:
    """Writes the pods' code tree into ``<run_dir>/transformers`` (replacing an older one); returns ``launch.py``."""
    root = stage_code_tree(Path(run_dir) / CODE_DIR, STAGED_MODULES)
    for script, module in ROOT_SCRIPTS.items():
        shutil.copyfile(module_file(module), root / script)
    return root / "launch.py"


def stage_data(source: Path, target: Path, label: str) -> Path:
    """Writes the rows of a checked chat JSONL file to ``target`` with list-of-parts contents joined into strings."""
    temporary = target.with_name(f".{target.name}.tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        for _, row in iter_chat_file(Path(source), allow_trailing_user=True, label=label):
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    temporary.replace(target)
    return target


def read_result(ckpt_dir: Path) -> dict[str, Any]:
    """Rank 0's ``result.json`` (``{}`` when it is missing or unreadable: the metrics and model still publish)."""
    from components.training.finetuning.hf_trainer.pod_launch import RESULT_FILE

    try:
        value = json.loads((Path(ckpt_dir) / RESULT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}
