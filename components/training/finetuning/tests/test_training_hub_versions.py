"""The pod command with the Training Hub releases RHOAI's runtime images carry: 0.3.0 (RHOAI 3.3), 0.6.0 (3.5), 0.9.8.

Each release runs from its own environment (``tests/harness/training_hub_envs.py``) through its real data processing
up to the GPU boundary; the runs are ``hub_runs.py``'s. ``FACTS`` is the README's "Training Hub versions" table.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from components.training.finetuning.pod import entrypoint, hub_compat
from components.training.finetuning.tests.hub_runs import ALGORITHMS
from tests.harness.training_hub_envs import MAIN_VERSION

VERSIONS = ["0.3.0", "0.6.0", "0.9.8"]

#: What each release takes (the README's "Training Hub versions" table): its functions, and the options and settings
#: that differ between releases, True where every function concerned names the keyword or its backend reads it:
#: jit = enable_jit_checkpoint, mlflow = mlflow_tracking_uri, osft_eval = osft's validation_data_path, osft_max_steps =
#: osft's max_steps and training_mode, lora_eval = lora_sft's eval_data_path.
_FACT_NAMES = ("sft", "osft", "lora_sft", "jit", "mlflow", "osft_eval", "osft_max_steps", "lora_eval")
# fmt: off
FACTS: dict[str, dict[str, bool]] = {
    version: dict(zip(_FACT_NAMES, row, strict=True))
    for version, row in {
        #          sft   osft  lora_sft jit    mlflow osft_eval osft_max_steps lora_eval
        "0.3.0":  (True, True, False,   False, False, False,    True,          False),
        "0.6.0":  (True, True, True,    False, True,  False,    True,          False),
        "0.9.8":  (True, True, True,    False, True,  False,    True,          True),
        "0.11.2": (True, True, True,    True,  True,  True,     True,          True),
    }.items()
}
# fmt: on


def _called_keywords(stdout: str, function_name: str) -> set[str]:
    """The keywords of the ``training-hub <function>(k=v, ...)`` line the pod printed before the call."""
    line = next(line for line in stdout.splitlines() if line.startswith(f"training-hub {function_name}("))
    call = ast.parse(line.removeprefix("training-hub "), mode="eval").body
    assert isinstance(call, ast.Call)
    return {keyword.arg for keyword in call.keywords if keyword.arg}


def _keyword_facts(taken: dict[str, list[str]]) -> dict[str, bool]:
    def takes(function: str, keyword: str) -> bool:
        return keyword in taken.get(function, ())

    functions = [name for name in ("sft", "osft", "lora_sft") if name in taken]
    return {
        "sft": "sft" in taken,
        "osft": "osft" in taken,
        "lora_sft": "lora_sft" in taken,
        "jit": all(takes(name, "enable_jit_checkpoint") for name in functions),
        "mlflow": all(takes(name, "mlflow_tracking_uri") for name in functions),
        "osft_eval": takes("osft", "validation_data_path"),
        "osft_max_steps": takes("osft", "max_steps") and takes("osft", "training_mode"),
        "lora_eval": takes("lora_sft", "eval_data_path"),
    }


@pytest.mark.slow
@pytest.mark.parametrize("version", [*VERSIONS, MAIN_VERSION])
def test_the_facts_table_holds(version, hub_runs):
    assert _keyword_facts(hub_runs.facts(version)) == FACTS[version]


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_pod_command_reaches_the_gpu_or_says_in_one_line_what_the_release_lacks(
    version, algorithm, hub_train_file, hub_runs
):
    rows = hub_train_file[1]
    function_name = entrypoint.TRAINING_HUB_FUNCTIONS[algorithm]
    run_config, process = hub_runs.pod(version, algorithm)
    output = process.stdout[-3000:] + process.stderr[-5000:]
    assert process.stdout.splitlines()[0].startswith(f"training-hub {version} (instructlab-training "), output
    assert process.returncode == 1, output
    last = [line for line in process.stderr.splitlines() if line.strip()][-1]
    if not FACTS[version][function_name]:
        assert last == "entrypoint: " + hub_compat.missing_function_message(version, function_name), output
        assert "Traceback" not in process.stderr and not Path(run_config["ckpt_output_dir"]).exists()
        assert f"training-hub {version} in this runtime's image has no lora_sft" in last
        assert "training_backend='transformers'" in last
        return
    assert last == entrypoint.no_gpu_message(algorithm), output
    called = _called_keywords(process.stdout, function_name)
    assert called <= set(hub_runs.facts(version)[function_name])  # every keyword is one the release takes
    notes = [line for line in process.stdout.splitlines() if line.startswith("note: ")]
    if not FACTS[version]["jit"]:  # asked for (jit_checkpoint=True), left out with one note naming the version
        assert "enable_jit_checkpoint" not in called
        assert any(f"training-hub {version} {function_name} does not take enable_jit_checkpoint" in n for n in notes)
    if not FACTS[version]["mlflow"]:
        assert not called & {"mlflow_tracking_uri", "mlflow_experiment_name", "mlflow_run_name"}
        assert any("running without MLflow tracking" in note for note in notes)
    validation = {"osft": ("osft_eval", "validation_data_path"), "lora": ("lora_eval", "eval_data_path")}
    if algorithm in validation:  # in-training validation on the eval split: passed where taken, else one note
        fact, keyword = validation[algorithm]
        assert (keyword in called) == FACTS[version][fact]
        assert any("running without validation on the eval split" in n for n in notes) != FACTS[version][fact]
    if algorithm != "lora":  # every row was processed in the pod by the release's own backend before the GPU boundary
        processed = Path(run_config["ckpt_output_dir"]) / "_data" / "data.jsonl"
        assert len(processed.read_text().splitlines()) == rows
