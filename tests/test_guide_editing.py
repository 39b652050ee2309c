"""The RHOAI guide's *Editing Existing Pipelines* recipes, applied as written to a copy of osft_minimal/pipeline.py.

The edits are the guide's own snippets (kept verbatim in ``tests/specs/guide/rhoai_guide_facts.yaml``); the copy is
compiled with the guide's command and the compiled YAML must change exactly as the guide promises.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.harness.compiled import pipeline_documents
from tests.test_parameter_sources import drift

REPO_ROOT = Path(__file__).resolve().parents[1]
FACTS = yaml.safe_load((REPO_ROOT / "tests/specs/guide/rhoai_guide_facts.yaml").read_text())
RECIPES = FACTS["editing_recipes"]
MODULE = REPO_ROOT / RECIPES["file"]


def _code(line: str) -> str:
    """A snippet line without its trailing comment (``# User can change this``) and surrounding blanks."""
    return line.split("#", 1)[0].strip()


def _line_of(text: str, code: str) -> str:
    """The one line of ``text`` whose code is ``code`` (asserting there is exactly one)."""
    found = [line for line in text.splitlines() if _code(line) == code]
    assert len(found) == 1, f"{code!r} occurs {len(found)} times in pipeline.py"
    return found[0]


def _compile(copy: Path) -> list[dict]:
    """The guide's compile command on ``copy``; returns the YAML documents it wrote beside it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KFP_FINETUNE_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    run = subprocess.run(
        [sys.executable, str(copy)], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    written = copy.with_name("pipeline.yaml")
    assert str(written) in run.stdout
    return pipeline_documents(written)


@pytest.fixture
def copy(tmp_path) -> Path:
    """A copy of the osft_minimal pipeline.py, in a folder of the same name (the checked-in YAML stays untouched)."""
    target = tmp_path / "osft_minimal" / "pipeline.py"
    target.parent.mkdir()
    shutil.copyfile(MODULE, target)
    return target


def _train_inputs(documents: list[dict]) -> dict:
    return documents[0]["root"]["dag"]["tasks"]["train-model"]["inputs"]["parameters"]


def test_making_a_runtime_parameter_compile_time(copy, shipped_pipeline_yamls):
    """Remove ``phase_02_train_man_train_epochs`` from the signature and write ``training_num_epochs=2``."""
    snippet = RECIPES["make_compile_time"]
    before, after = snippet.split("# After", 1)
    signature_line = next(_code(line) for line in before.splitlines() if "phase_02_train_man_train_epochs:" in line)
    call_before = next(_code(line) for line in before.splitlines() if "training_num_epochs=" in line)
    call_after = next(_code(line) for line in after.splitlines() if "training_num_epochs=" in line)
    assert (signature_line, call_before, call_after) == (
        "phase_02_train_man_train_epochs: int = 1,",
        "training_num_epochs=phase_02_train_man_train_epochs,",
        "training_num_epochs=2,",
    )
    assert (
        f"def {RECIPES['pipeline_function']}(" in copy.read_text()
        and "training_task = train_model(" in copy.read_text()
    )

    text = copy.read_text()
    text = text.replace(_line_of(text, signature_line) + "\n", "")
    old_call = _line_of(text, call_before)
    text = text.replace(old_call, old_call.replace(call_before, call_after))
    copy.write_text(text)
    documents = _compile(copy)

    assert "phase_02_train_man_train_epochs" not in documents[0]["root"]["inputDefinitions"]["parameters"]
    assert _train_inputs(documents)["training_num_epochs"] == {"runtimeValue": {"constant": 2}}
    original = pipeline_documents(shipped_pipeline_yamls["osft-minimal"])[0]
    assert set(original["root"]["inputDefinitions"]["parameters"]) - set(
        documents[0]["root"]["inputDefinitions"]["parameters"]
    ) == {"phase_02_train_man_train_epochs"}
    # The consistency check notices the edit (a constant that is neither the component's default nor declared).
    (found,) = drift("osft-minimal", documents[0])
    assert re.fullmatch(r"osft-minimal: train.training_num_epochs gets 2(\.0)? \(constant\), expected 1", found)


def test_adding_a_new_runtime_parameter(copy):
    """Add ``phase_02_train_opt_gradient_checkpointing: bool = True``, pass it on, document it."""
    snippet = RECIPES["add_runtime_parameter"]
    signature_line = next(_code(line) for line in snippet.splitlines() if "phase_02_train_opt_gradient" in line)
    call_line = next(_code(line) for line in snippet.splitlines() if line.strip().startswith("training_gradient"))
    assert signature_line == "phase_02_train_opt_gradient_checkpointing: bool = True,"
    assert call_line == "training_gradient_checkpointing=phase_02_train_opt_gradient_checkpointing,"

    text = copy.read_text()
    # 1. the signature (after the last parameter), 2. the train_model call, 3. the docstring's Args.
    signature_end = text.index("\n):\n", text.index(f"def {RECIPES['pipeline_function']}("))
    text = text[:signature_end] + f"\n    {signature_line}" + text[signature_end:]
    call = "    training_task = train_model(\n"
    text = text.replace(call, call + f"        {call_line}\n", 1)
    args_end = text.index('    """\n', text.index("    Args:\n"))
    doc = "        phase_02_train_opt_gradient_checkpointing: Recompute activations to save GPU memory.\n"
    text = text[:args_end] + doc + text[args_end:]
    copy.write_text(text)
    documents = _compile(copy)

    parameter = documents[0]["root"]["inputDefinitions"]["parameters"]["phase_02_train_opt_gradient_checkpointing"]
    assert (parameter["parameterType"], parameter["defaultValue"]) == ("BOOLEAN", True)
    assert parameter["description"] == "Recompute activations to save GPU memory."
    wiring = _train_inputs(documents)["training_gradient_checkpointing"]
    assert wiring == {"componentInputParameter": "phase_02_train_opt_gradient_checkpointing"}
    component = documents[0]["components"]["comp-train-model"]["inputDefinitions"]["parameters"]
    assert component["training_gradient_checkpointing"]["parameterType"] == "BOOLEAN"
    # Same name, type and default as the expert OSFT pipeline's; only the (shorter) description differs.
    found = drift("osft-minimal", documents[0])
    assert found == [
        "osft-minimal: phase_02_train_opt_gradient_checkpointing's description is not "
        "train.training_gradient_checkpointing's"
    ]


def test_the_defaults_the_guide_states_are_the_compiled_defaults(shipped_pipeline_yamls):
    """``osft_minimal_pipeline(phase_02_train_man_train_epochs: int = 1)`` and the PVC constants, as compiled."""
    stated = dict(re.findall(r"(phase_\w+): \w+ = ([^,\s]+),", RECIPES["make_compile_time"]))
    assert stated == {"phase_02_train_man_train_epochs": "1"}
    assert FACTS["defaults"]["osft-minimal"] == {name: yaml.safe_load(value) for name, value in stated.items()}
    for pipeline, defaults in FACTS["defaults"].items():
        documents = pipeline_documents(shipped_pipeline_yamls[pipeline])
        parameters = documents[0]["root"]["inputDefinitions"]["parameters"]
        for name, value in defaults.items():
            assert parameters[name]["defaultValue"] == value, (pipeline, name)
    documents = pipeline_documents(shipped_pipeline_yamls["osft-minimal"])
    workspace = documents[1]["platforms"]["kubernetes"]["pipelineConfig"]["workspace"]
    constants = {name: yaml.safe_load(value) for name, value in FACTS["pvc"]["constants"].items()}
    assert (workspace["size"], workspace["kubernetes"]["pvcSpecPatch"]) == (
        constants["PVC_SIZE"],
        {"accessModes": constants["PVC_ACCESS_MODES"], "storageClassName": constants["PVC_STORAGE_CLASS"]},
    )
    assert documents[0]["pipelineInfo"]["name"] == constants["PIPELINE_NAME"]
    eval_tasks = documents[0]["root"]["inputDefinitions"]["parameters"]["phase_03_eval_man_eval_tasks"]
    assert eval_tasks["defaultValue"] == FACTS["default_eval_tasks"]
