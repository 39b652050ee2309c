"""Preemption's pieces: the SIGTERM flag and the checkpoints put in place whole (end to end: test_training_local)."""

import os
import signal
import time

from components.training.finetuning.hf_trainer.preemption import (
    COMPLETE_MARKER,
    newest_complete_checkpoint,
    publish_checkpoint,
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


def _saved(directory, state="{}"):
    """A checkpoint as the Trainer saves it, before it is published."""
    directory.mkdir(parents=True)
    (directory / "state.json").write_text(state)
    return directory


def test_incomplete_checkpoints_are_ignored(tmp_path):
    root = tmp_path / "checkpoints"
    first = publish_checkpoint(_saved(tmp_path / ".trainer" / "checkpoint-10"), root, 10, {"epoch": 0}, keep_last=0)
    assert read_marker(first) == {"step": 10, "epoch": 0} and not (tmp_path / ".trainer" / "checkpoint-10").exists()
    # A later checkpoint whose marker never got written, one with a broken marker, a hidden one.
    (root / "step_000000020").mkdir()
    (root / "step_000000030").mkdir()
    (root / "step_000000030" / COMPLETE_MARKER).write_text('{"step": ')
    (root / "step_000000040").mkdir()
    (root / "step_000000040" / COMPLETE_MARKER).write_text('{"step": "40"}')
    (root / ".step_000000050.replaced").mkdir()
    (root / ".step_000000050.replaced" / COMPLETE_MARKER).write_text('{"step": 50}')
    (root / "notes.txt").write_text("not a checkpoint")
    assert newest_complete_checkpoint(root) == first
    assert newest_complete_checkpoint(tmp_path / "missing") is None


def test_old_checkpoints_are_pruned_and_a_step_saved_again_replaces_its_checkpoint(tmp_path):
    root = tmp_path / "checkpoints"
    for step in (10, 20, 30):
        publish_checkpoint(_saved(tmp_path / f"checkpoint-{step}"), root, step, {})
    assert sorted(path.name for path in root.iterdir()) == ["step_000000020", "step_000000030"]
    again = publish_checkpoint(_saved(tmp_path / "checkpoint-30", '{"again": true}'), root, 30, {})
    assert (again / "state.json").read_text() == '{"again": true}'
    assert sorted(path.name for path in root.iterdir()) == ["step_000000020", "step_000000030"]
