"""Outputs are written with the mode ``open()`` would give them (group-readable under the usual umask), not 0600."""

import os
import stat
from pathlib import Path

import pytest

from components._common.files import new_file_mode, process_umask, replace_dir, write_text_atomically


@pytest.fixture(params=[0o022, 0o027, 0o002])
def umask(request):
    previous = os.umask(request.param)
    yield request.param
    os.umask(previous)


def test_atomic_writes_and_replaced_directories_get_the_umask_mode(tmp_path, umask):
    assert process_umask() == umask
    target = tmp_path / "report.md"
    write_text_atomically(target, "# report\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask == new_file_mode()
    assert stat.S_IMODE(target.stat().st_mode) & 0o040  # group-readable: 0644 / 0640 / 0664, never 0600
    directory = replace_dir(tmp_path / "model", lambda staging: (staging / "config.json").write_text("{}"))
    assert stat.S_IMODE(directory.stat().st_mode) == 0o777 & ~umask


def test_the_dataset_split_files_get_the_umask_mode(tmp_path, umask):
    from components.data_processing.dataset_download.split import JsonlWriter

    writer = JsonlWriter(tmp_path / "train.jsonl")
    writer.write_rows([b'{"messages": []}\n'])
    writer.commit()
    mode = stat.S_IMODE(Path(tmp_path / "train.jsonl").stat().st_mode)
    assert mode == 0o666 & ~umask, oct(mode)
