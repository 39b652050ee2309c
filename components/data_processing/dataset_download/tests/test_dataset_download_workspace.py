"""The first step checks the run's workspace: an unusable ``pvc_path`` fails in one line, before any download."""

from __future__ import annotations

import pytest

from components.data_processing.dataset_download.run import run_dataset_download
from pipelines.demo.demo_data import DEMO_DATASET_PATH
from tests.harness.requests import dataset_download_request, run_dataset_step


def test_a_workspace_that_is_not_writable_fails_the_first_step_in_one_line(tmp_path):
    not_a_directory = tmp_path / "workspace-file"
    not_a_directory.write_text("")
    request = dataset_download_request(str(DEMO_DATASET_PATH), pvc_path=str(not_a_directory))
    with pytest.raises(OSError) as error:
        run_dataset_download(request, tmp_path / "train", tmp_path / "eval")
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"dataset_download parameter pvc_path='{not_a_directory}'")
    assert "not writable here" in message and "PVC_STORAGE_CLASS" in message
    assert not (tmp_path / "train").exists() and not (tmp_path / "eval").exists()


def test_a_writable_workspace_is_left_as_it_was(tmp_path):
    workspace = tmp_path / "kfp-workspace"
    workspace.mkdir()
    run_dataset_step(str(DEMO_DATASET_PATH), tmp_path, pvc_path=str(workspace))
    assert list(workspace.iterdir()) == []  # the probe file is removed
    assert (tmp_path / "train.jsonl").exists()
