"""Preemption: a real process gets SIGTERM mid-run, saves a complete checkpoint, exits 143 and a re-run resumes.

The training loop in the child process is a plain counter whose "state" is the running sum of the steps; a checkpoint
holds the step and the sum, so a resume that skipped or redid a step would end with a different sum.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from components.training.finetuning.hf_trainer.preemption import (
    COMPLETE_MARKER,
    SIGTERM_EXIT_CODE,
    CheckpointWriter,
    newest_complete_checkpoint,
    read_marker,
    sigterm_flag,
)
from components.training.finetuning.local import trainer as local_trainer

REPO_ROOT = Path(__file__).resolve().parents[4]
TOTAL_STEPS = 400
LOOP = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from components.training.finetuning.hf_trainer.preemption import (
        CheckpointWriter, newest_complete_checkpoint, sigterm_flag,
    )

    root, total = Path(sys.argv[1]), int(sys.argv[2])
    writer = CheckpointWriter(root, keep_last=2)
    state = {"step": 0, "sum": 0}
    checkpoint = newest_complete_checkpoint(root)
    if checkpoint is not None:
        state = json.loads((checkpoint / "state.json").read_text())
        print(f"resumed {state['step']}", flush=True)

    def save():
        writer.write(state["step"], lambda d: (d / "state.json").write_text(json.dumps(state)), {"sum": state["sum"]})

    with sigterm_flag(log=lambda line: print(line, flush=True)) as flag:
        while state["step"] < total:
            state["step"] += 1
            time.sleep(0.002)
            state["sum"] += state["step"]
            if state["step"] % 50 == 0:
                save()
            print(f"step {state['step']}", flush=True)
            if flag.requested:
                save()
                sys.exit(143)
    print(f"finished {state['step']} {state['sum']}", flush=True)
    """
)


def _start(root):
    return subprocess.Popen(
        [sys.executable, "-c", LOOP, str(root), str(TOTAL_STEPS)],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _terminate_at(process, step):
    """Reads the child's output until it reports ``step``, then sends SIGTERM; returns all output and the status."""
    lines = []
    for line in process.stdout:
        lines.append(line.strip())
        if line.strip() == f"step {step}":
            process.send_signal(signal.SIGTERM)
            break
    rest, _ = process.communicate(timeout=30)
    return lines + rest.split("\n"), process.returncode


def test_sigterm_mid_run_leaves_a_complete_checkpoint_and_the_rerun_resumes_to_the_same_end(tmp_path):
    root = tmp_path / "checkpoints"
    output, status = _terminate_at(_start(root), 77)
    assert status == SIGTERM_EXIT_CODE, output
    assert output.count("SIGTERM: saving a checkpoint at the end of this step") == 1
    checkpoint = newest_complete_checkpoint(root)
    state = json.loads((checkpoint / "state.json").read_text())
    marker = read_marker(checkpoint)
    # Saved on SIGTERM (after step 77, before the next periodic save at 100), consistent with its marker.
    assert 77 <= state["step"] < 100 and marker["step"] == state["step"]
    assert state["sum"] == marker["sum"] == state["step"] * (state["step"] + 1) // 2
    assert [path.name for path in root.iterdir()] == [path.name for path in root.iterdir() if path.name[0] != "."]
    assert sorted(path.name for path in root.iterdir()) == ["step_000000050", checkpoint.name]

    resumed = _start(root)
    output, _ = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, output
    lines = output.split("\n")
    assert lines[0] == f"resumed {state['step']}"
    assert lines[1] == f"step {state['step'] + 1}"
    assert f"finished {TOTAL_STEPS} {TOTAL_STEPS * (TOTAL_STEPS + 1) // 2}" in lines


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
    with pytest.raises(ValueError, match="step=-1"):
        writer.write(-1, broken)
    with pytest.raises(ValueError, match="must not set 'step'"):
        writer.write(1, broken, {"step": 2})
    with pytest.raises(ValueError, match="keep_last=-1"):
        CheckpointWriter(tmp_path, keep_last=-1)


def test_finds_the_local_launchers_epoch_checkpoints_like_it_does(tmp_path):
    """The local launcher's older ``epoch_<e>`` checkpoints (same marker) are found too, so they still resume."""
    root = tmp_path / local_trainer.CHECKPOINTS_DIR
    for epoch, step, complete in ((0, 12, True), (1, 24, True), (2, 36, False)):
        directory = root / f"epoch_{epoch}"
        directory.mkdir(parents=True)
        if complete:
            (directory / COMPLETE_MARKER).write_text(json.dumps({"epoch": epoch, "step": step, "elapsed": 1.5}))
    assert newest_complete_checkpoint(root) == root / "epoch_1"
