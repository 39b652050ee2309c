"""Paths the demo hands to ``kfp.local``'s steps, kept clear of a ``kfp.local`` bug that rewrites ``python3``.

``kfp.local``'s ``SubprocessRunner`` replaces ``python3`` in every element of a step's command, its arguments
included, with this interpreter's path (``replace_python_executable``, kfp 2.15.2 and 2.17.3; fix proposed upstream in
kubeflow/pipelines#14459, ``tests/test_wheel.py`` fails once the pinned kfp has it). Installed from the wheel, the demo
data lies under ``lib/python3.11/site-packages/``: the demo hands the steps a copy under the output directory, and
refuses in one line any other path that would be mangled.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipelines.demo.demo_data import DEMO_DATASET_PATH

#: What ``kfp.local`` rewrites in a step's arguments.
KFP_LOCAL_REWRITTEN = "python3"
#: The demo's shipped data (the chat dataset and the ``general_sentences`` task).
DEMO_DATA_DIR = DEMO_DATASET_PATH.parent


def steps_data_dir(output_dir: Path, shipped: Path = DEMO_DATA_DIR) -> Path:
    """``shipped``, or its copy in ``output_dir/data`` when ``kfp.local`` would mangle its path (an installed wheel)."""
    if KFP_LOCAL_REWRITTEN not in str(shipped):
        return shipped
    copy = Path(output_dir) / "data"
    shutil.copytree(shipped, copy, dirs_exist_ok=True)
    return copy


def check_step_arguments(arguments: Mapping[str, Any]) -> None:
    """Fails, naming the argument, when ``kfp.local`` would mangle a value (it contains ``python3``).

    Raises:
        ValueError: One line naming the argument, its value and the way around.
    """
    for name, value in arguments.items():
        for item in value if isinstance(value, list | tuple) else [value]:
            if isinstance(item, str) and KFP_LOCAL_REWRITTEN in item:
                raise ValueError(
                    f"{name}={item!r}: kfp.local rewrites '{KFP_LOCAL_REWRITTEN}' in a step's arguments into this "
                    "interpreter's path (kubeflow/pipelines#14459); use a path without it (--output-dir, "
                    "--dataset-uri)"
                )
