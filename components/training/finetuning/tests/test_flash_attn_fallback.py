"""Training images without flash-attn: SFT and OSFT run with PyTorch SDPA, each backend through its own switch.

The last test fails once mini-trainer falls back to SDPA by itself (then drop the ``TESTING`` variable).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from components.training.finetuning.pod import entrypoint

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("flash_attn") is not None, reason="flash-attn is installed: no fallback to check"
)


@pytest.mark.parametrize(
    ("function", "expected", "note"),
    [
        ("sft", ({"disable_flash_attn": True}, {}), "SFT runs with PyTorch SDPA attention"),
        ("osft", ({}, {"TESTING": "true"}), "OSFT runs with PyTorch SDPA attention (TESTING=true)"),
        ("lora_sft", ({}, {}), None),
    ],
)
def test_each_backend_gets_its_own_sdpa_switch_and_one_note(function, expected, note):
    lines: list[str] = []
    assert entrypoint.image_settings(function, log=lines.append) == expected
    assert lines == ([f"note: flash-attn is not installed in this image: {note}"] if note else [])


#: mini-trainer's model set-up, without and with ``TESTING``, in a process of its own: importing mini-trainer patches
#: transformers' loss for the whole process. Prints each attempt's error ("" when it got through).
_SETUP_MODEL = """
import json, os, sys
from mini_trainer.setup_model_for_training import setup_model
errors = []
for testing in (None, "true"):
    os.environ.pop("TESTING", None)
    if testing:
        os.environ["TESTING"] = testing
    try:
        setup_model(sys.argv[1], osft=True, osft_rank_ratio=0.25)
        errors.append("")
    except Exception as error:
        errors.append(repr(error))
print(json.dumps(errors))
"""


def test_mini_trainer_still_needs_flash_attn_outside_testing(tiny_model_dir):
    """Without ``TESTING`` mini-trainer's set-up re-raises flash-attn's ImportError; with it, it gets past that."""
    done = subprocess.run(
        [sys.executable, "-c", _SETUP_MODEL, str(tiny_model_dir)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    without_testing, with_testing = json.loads(done.stdout.splitlines()[-1])
    assert "flash_attn" in without_testing
    assert "flash_attn" not in with_testing
