"""Training images without flash-attn: SFT and OSFT run with PyTorch SDPA, each backend through its own switch.

Seen on an H100 (README "GPU run", 2026-11-27): OSFT through mini-trainer 0.9.0 stopped with ``No module named
'flash_attn'`` in an image without it, after the data processing. The pod now sets mini-trainer's ``TESTING``
variable there; the last test here fails once mini-trainer falls back to SDPA by itself (then drop the variable).
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


def test_sft_without_flash_attn_asks_instructlab_training_for_sdpa():
    lines: list[str] = []
    assert entrypoint.image_settings("sft", log=lines.append) == ({"disable_flash_attn": True}, {})
    assert lines == ["note: flash-attn is not installed in this image: SFT runs with PyTorch SDPA attention"]


def test_osft_without_flash_attn_sets_mini_trainers_sdpa_switch_and_says_so():
    lines: list[str] = []
    assert entrypoint.image_settings("osft", log=lines.append) == ({}, {"TESTING": "true"})
    assert lines == [
        "note: flash-attn is not installed in this image: OSFT runs with PyTorch SDPA attention (TESTING=true)"
    ]


def test_lora_needs_neither_switch():
    lines: list[str] = []
    assert entrypoint.image_settings("lora_sft", log=lines.append) == ({}, {})
    assert lines == []


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
    """mini-trainer's model set-up (the OSFT training process) on CPU, up to its attention choice.

    Without ``TESTING`` it re-raises flash-attn's ImportError; with ``TESTING=true`` it gets past that point (whatever
    stops it later on a CPU is not flash-attn). Once the first half fails, mini-trainer falls back by itself.
    """
    done = subprocess.run(
        [sys.executable, "-c", _SETUP_MODEL, str(tiny_model_dir)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    without_testing, with_testing = json.loads(done.stdout.splitlines()[-1])
    assert "flash_attn" in without_testing
    assert "flash_attn" not in with_testing
