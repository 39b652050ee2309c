"""Preemption's pieces: the SIGTERM flag and the atomic checkpoints (end to end: test_training_local's SIGTERM test)."""

import os
import signal
import time

import pytest

from components.training.finetuning.hf_trainer.preemption import (
    COMPLETE_MARKER,
    CheckpointWriter,
    newest_complete_checkpoint,
    read_marker,
    sigterm_flag,
)


def test_the_previous_handler_is_restored_and_a_plain_block_does_nothing():
    def previous(signum, frame):
        raise AssertionError("not called")

    old = signal.signal(signal.SIGTERM, previous)
    try:
        with sigterm_flag(log=lambda line: None) as flag:
            assert signal.getsignal(signal.SIGTERM) is not previous and flag.installed
        assert signal.getsignal(signal.SIGTERM) is previous
        assert not flag.requested and not flag.installed
    finally:
        signal.signal(signal.SIGTERM, old)


def test_sigterm_in_this_process_sets_the_flag_and_says_so_once():
    log = []
    with sigterm_flag(log=log.append) as flag:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)  # a second one (the grace period's reminder) changes nothing
        time.sleep(0.1)
        assert flag.requested
    assert log == ["SIGTERM: saving a checkpoint at the end of this step"]


def test_incomplete_checkpoints_are_ignored(tmp_path):
    writer = CheckpointWriter(tmp_path, keep_last=0)
    first = writer.write(10, lambda d: (d / "state.json").write_text("{}"), {"epoch": 0})
    assert read_marker(first) == {"step": 10, "epoch": 0}
    # A later checkpoint whose marker never got written, one with a broken marker, one still being staged.
    (tmp_path / "step_000000020").mkdir()
    (tmp_path / "step_000000030").mkdir()
    (tmp_path / "step_000000030" / COMPLETE_MARKER).write_text('{"step": ')
    (tmp_path / "step_000000040").mkdir()
    (tmp_path / "step_000000040" / COMPLETE_MARKER).write_text('{"step": "40"}')
    (tmp_path / ".step_000000050.partial-x").mkdir()
    (tmp_path / ".step_000000050.partial-x" / COMPLETE_MARKER).write_text('{"step": 50}')
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    assert newest_complete_checkpoint(tmp_path) == first
    assert newest_complete_checkpoint(tmp_path / "missing") is None


def test_a_failing_save_leaves_nothing_behind_and_old_checkpoints_are_pruned(tmp_path):
    writer = CheckpointWriter(tmp_path, keep_last=2)

    def broken(directory):
        (directory / "state.json").write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        writer.write(5, broken)
    assert list(tmp_path.iterdir()) == []
    for step in (10, 20, 30):
        writer.write(step, lambda d: (d / "state.json").write_text("{}"))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["step_000000020", "step_000000030"]
    again = writer.write(30, lambda d: (d / "state.json").write_text('{"again": true}'))
    assert (again / "state.json").read_text() == '{"again": true}'
    assert sorted(path.name for path in tmp_path.iterdir()) == ["step_000000020", "step_000000030"]
