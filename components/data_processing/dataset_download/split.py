"""Seeded, streaming subset and train/eval split with exact sizes, written as JSONL with a running sha256.

Selection sampling (Knuth's algorithm S) picks exactly ``k`` of ``n`` rows in one pass and O(1) memory, keeping the
source order: row ``i`` is taken with probability ``(k - taken) / (n - i)``. The subset is drawn first, then the eval
rows among the subset, each from its own ``random.Random`` seeded from ``seed``, so that the same input and seed
give byte-identical files.
"""

from __future__ import annotations

import hashlib
import os
import random
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SplitPlan:
    """How many rows to keep and how many of them go to eval, with the warnings that decided it."""

    rows_available: int
    rows_selected: int
    eval_rows: int
    warnings: tuple[str, ...] = ()

    @property
    def train_rows(self) -> int:
        """Rows that go to the train split."""
        return self.rows_selected - self.eval_rows


def check_split_options(train_split_ratio: float, subset_count: int) -> None:
    """Raises ``ValueError`` naming the parameter when the ratio is outside (0, 1] or the subset count negative."""
    if not 0.0 < train_split_ratio <= 1.0:
        raise ValueError(f"train_split_ratio={train_split_ratio!r} must be in (0, 1] (1.0 = no eval split)")
    if subset_count < 0:
        raise ValueError(f"subset_count={subset_count!r} must be >= 0 (0 = all rows)")


def plan_split(rows_available: int, train_split_ratio: float, subset_count: int) -> SplitPlan:
    """Decides the subset size and the number of eval rows.

    Args:
        rows_available: Valid rows in the dataset (> 0).
        train_split_ratio: Fraction of the kept rows that go to train; 1.0 means no eval split.
        subset_count: Rows to keep (0 = all); more than available warns and keeps all.

    Returns:
        The plan. With a ratio below 1, eval gets ``round(kept * (1 - ratio))`` rows, at least 1 and at most
        ``kept - 1`` when there are two rows or more.
    """
    check_split_options(train_split_ratio, subset_count)
    warnings = []
    selected = rows_available
    if subset_count and subset_count > rows_available:
        warnings.append(f"subset_count={subset_count} > {rows_available} valid rows: using all {rows_available}")
    elif subset_count:
        selected = subset_count
    eval_rows = 0
    if train_split_ratio < 1.0:
        if selected < 2:
            warnings.append(f"train_split_ratio={train_split_ratio} but only {selected} row: no eval split")
        else:
            eval_rows = min(max(round(selected * (1.0 - train_split_ratio)), 1), selected - 1)
    return SplitPlan(rows_available, selected, eval_rows, tuple(warnings))


class _Sampler:
    """Selection sampling: :meth:`take` answers, row by row, whether the row is among ``k`` picked of ``n``."""

    def __init__(self, k: int, n: int, seed: str) -> None:
        self._rng = random.Random(seed)
        self._left_to_take = k
        self._left_to_see = n

    def take(self) -> bool:
        taken = self._left_to_take > 0 and self._rng.random() * self._left_to_see < self._left_to_take
        self._left_to_see -= 1
        self._left_to_take -= taken
        return taken


@dataclass(frozen=True)
class WrittenFile:
    """A JSONL file written by :class:`JsonlWriter`: its path, row count and sha256."""

    path: Path
    rows: int
    sha256: str


class JsonlWriter:
    """Writes lines to a temporary file beside ``target``, hashing as it goes; :meth:`commit` renames it."""

    def __init__(self, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        self.target = target
        handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        self._temp = Path(name)
        self._file = os.fdopen(handle, "wb")
        self._digest = hashlib.sha256()
        self.rows = 0

    def write(self, line: bytes) -> None:
        """Appends one JSONL line (with its newline)."""
        self._file.write(line)
        self._digest.update(line)
        self.rows += 1

    def commit(self) -> WrittenFile:
        """Closes the file and moves it to ``target``."""
        self._file.close()
        os.replace(self._temp, self.target)
        return WrittenFile(self.target, self.rows, self._digest.hexdigest())

    def discard(self) -> None:
        """Closes and removes the temporary file (nothing half-written is left)."""
        self._file.close()
        self._temp.unlink(missing_ok=True)


def write_split(
    lines: Iterable[bytes],
    plan: SplitPlan,
    seed: int,
    train: JsonlWriter,
    eval_: JsonlWriter,
    on_selected: Callable[[bytes], None] | None = None,
) -> None:
    """Routes each line to train, eval or nowhere according to ``plan`` and ``seed``.

    Args:
        lines: The valid rows as JSONL lines, exactly ``plan.rows_available`` of them, in source order.
        plan: From :func:`plan_split`.
        seed: The seed; the same seed and input give the same files.
        train: Receives the train rows.
        eval_: Receives the eval rows.
        on_selected: Called with every kept line (e.g. for token statistics).
    """
    subset = _Sampler(plan.rows_selected, plan.rows_available, f"{seed}:subset")
    evaluation = _Sampler(plan.eval_rows, plan.rows_selected, f"{seed}:eval")
    for line in lines:
        if not subset.take():
            continue
        if on_selected is not None:
            on_selected(line)
        (eval_ if evaluation.take() else train).write(line)
