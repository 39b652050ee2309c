"""The image lane's driver (``tests/image_lane/``) without an image: a compiled step's command resolved as KFP's
launcher would and run on this machine, and the lane's one-line failure naming the exception.

The lane itself (``bash scripts/image_lane/run.sh``: build the image, run the four steps inside it) needs root and
buildah; ``.ci/run`` runs it after the suite.
"""

import os
import subprocess
import sys
from pathlib import Path

from tests.image_lane.container import Finished
from tests.image_lane.lane import check_compiled, compile_pipeline
from tests.image_lane.steps import compiled_steps, outputs, resolved_command

REPO_ROOT = Path(__file__).resolve().parents[1]
IMAGE = "localhost/kfp-finetune:lane"


def test_a_compiled_step_runs_from_the_executor_input_the_driver_builds(tmp_path, demo_dataset_path):
    pipeline_yaml = compile_pipeline(IMAGE, tmp_path)
    steps = compiled_steps(pipeline_yaml)
    assert {"dataset-download", "train-model", "lm-eval", "model-registry"} <= set(steps)
    check_compiled(steps, IMAGE, pipeline_yaml)  # every step on the image, nothing embedded, nothing installed
    command, task_root = resolved_command(steps["dataset-download"], {"dataset_uri": str(demo_dataset_path)}, tmp_path)
    assert command[:2] == ["sh", "-ec"] and "{{$" not in " ".join(command)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env["PYTHONPATH"] = str(REPO_ROOT)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    written = outputs(task_root)
    train = Path(written["artifacts"]["train_dataset"].uri)
    assert train.is_relative_to(task_root) and written["artifacts"]["train_dataset"].metadata["dataset_uri"]
    assert sum(1 for path in train.parent.rglob("*") if path.is_file() and path.stat().st_size) >= 1


def test_a_failed_step_is_named_by_the_exception_that_ended_it():
    output = "Traceback (most recent call last):\n  File x\nModuleNotFoundError: No module named 'msgspec'\n"
    output += "Error: exit status 1\n"  # buildah's own last line
    assert Finished(1, output).last_error() == "ModuleNotFoundError: No module named 'msgspec'"
    assert Finished(1, "nothing useful\n").last_error() == "nothing useful"
