"""The size of the house (issues 34, 48): product lines, product duplicate pairs, product modules over 400 lines.

Product code is every ``.py`` file under ``components/``, ``pipelines/`` and ``kfp_finetune/`` outside a ``tests/``
folder (issue 48's count: ``find components pipelines kfp_finetune -name '*.py' -not -path '*/tests/*' | xargs cat |
wc -l``). Duplicate pairs are what the ``duplicates`` command (when it is on ``PATH``) finds in a copy of just those
files; its first line and rows are printed. Targets: <= 22,000 lines (issue 48), <= 25 pairs, no module over 400
lines (``tests/test_module_size.py`` holds the exceptions). The pairs are also split in two: the declarative wiring
(both places are a pipeline's ``pipeline.py`` or a component's ``component.py``: the six explicit pipelines'
signatures and calls, which the architecture allows to repeat) and the rest, where repeated logic would be.

Usage: ``python benchmarks/house_figures.py [--rev REV] [--rows N] [--write-figures]`` from the repository root;
``--rev`` measures a commit (``git archive``) instead of the working tree, e.g. ``--rev main`` for the figures before
a change; ``--write-figures`` records them in ``docs/figures.json`` (``house.*``, or ``house.<REV>.*`` with ``--rev``;
the line counts are also re-measured by ``scripts/figures.py``, :func:`figures`).
"""

from __future__ import annotations

import argparse
import io
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
PRODUCT = ("components", "pipelines", "kfp_finetune")
MAX_LINES = 400
TARGET_LINES = 22_000


def product_files(root: Path) -> list[Path]:
    """The product modules under ``root``, relative to it, sorted."""
    return sorted(
        path.relative_to(root)
        for folder in PRODUCT
        if (root / folder).is_dir()
        for path in (root / folder).rglob("*.py")
        if "tests" not in path.relative_to(root).parts and path.is_file()
    )


def line_counts(root: Path) -> dict[str, int]:
    """Lines of each product module (newline characters, as ``wc -l`` counts them), by path."""
    return {str(path): (root / path).read_bytes().count(b"\n") for path in product_files(root)}


def duplicate_pairs(root: Path, rows: int) -> tuple[int | None, list[str]]:
    """The number of product duplicate pairs and the first ``rows`` lines of ``duplicates``' report.

    Returns ``(None, [why])`` when ``duplicates`` is not on ``PATH``.
    """
    command = shutil.which("duplicates")
    if command is None:
        return None, ["duplicates: not on PATH, pairs not counted"]
    with tempfile.TemporaryDirectory(prefix="house-figures-") as copy:
        for path in product_files(root):
            (Path(copy) / path).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / path, Path(copy) / path)
        done = subprocess.run(
            [command, "--most", "200", "--seconds", "300"], cwd=copy, capture_output=True, text=True, timeout=600
        )
    lines = done.stdout.splitlines()
    first = lines[0] if lines else ""
    found = re.match(r"(\d+) pairs? ", first)
    count = int(found.group(1)) if found else (0 if first.startswith("no duplicates") else None)
    return count, lines[: rows + 1]


WIRING_FILES = ("pipeline.py", "component.py")
_ROW = re.compile(r"^\s*D\d+ (\S+?):\d+-\d+ ~ (\S+?):\d+-\d+")


def wiring_rows(report: list[str]) -> list[str]:
    """The rows of ``duplicates``' report whose two places are both declarative wiring (``WIRING_FILES``)."""
    return [
        line
        for line in report
        if (row := _ROW.match(line)) and all(Path(place).name in WIRING_FILES for place in row.groups())
    ]


def figures(root: Path = REPO_ROOT, prefix: str = "house") -> dict[str, dict]:
    """The line figures the documents state (cheap: ``scripts/figures.py`` re-measures them on every check)."""
    from scripts.figures import figure

    counts = line_counts(root)
    lines = sum(counts.values())
    return {
        f"{prefix}.product_lines": figure(lines, "lines", f"{lines:,}"),
        f"{prefix}.product_modules": figure(len(counts), "modules"),
        f"{prefix}.modules_over_400": figure(sum(1 for n in counts.values() if n > MAX_LINES), "modules"),
    }


def _tree(rev: str, target: Path) -> Path:
    """The product folders of commit ``rev``, extracted under ``target``."""
    listed = subprocess.run(["git", "ls-tree", "--name-only", rev], cwd=REPO_ROOT, capture_output=True, text=True)
    folders = [name for name in PRODUCT if name in listed.stdout.split()]
    archive = subprocess.run(["git", "archive", rev, *folders], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="", help="a commit to measure instead of the working tree")
    parser.add_argument("--rows", type=int, default=0, help="duplicate rows to print below the count")
    parser.add_argument("--write-figures", action="store_true", help="record the figures in docs/figures.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="house-tree-") as scratch:
        root = _tree(args.rev, Path(scratch)) if args.rev else REPO_ROOT
        counts = line_counts(root)
        pairs, report = duplicate_pairs(root, 200)
        found = figures(root, f"house.{args.rev}" if args.rev else "house")
    wiring = len(wiring_rows(report))
    if args.write_figures:
        from scripts.figures import figure, record

        prefix = f"house.{args.rev}" if args.rev else "house"
        if pairs is not None:
            found[f"{prefix}.duplicate_pairs"] = figure(pairs, "pairs")
            found[f"{prefix}.duplicate_pairs.wiring"] = figure(wiring, "pairs")
            found[f"{prefix}.duplicate_pairs.other"] = figure(pairs - wiring, "pairs")
        record(found, "benchmarks/house_figures.py")
    long = {name: lines for name, lines in counts.items() if lines > MAX_LINES}
    print(f"tree: {args.rev or 'working tree'}")
    print(f"product lines: {sum(counts.values())} in {len(counts)} modules (target <= {TARGET_LINES})")
    print(f"product duplicate pairs: {pairs if pairs is not None else 'unknown'} (target <= 25)")
    if pairs is not None:
        print(f"  declarative wiring (pipeline.py / component.py on both sides): {wiring}; the rest: {pairs - wiring}")
    print(*(f"  {line}" for line in report[: args.rows + 1]), sep="\n")
    print(f"modules over {MAX_LINES} lines: {len(long)}")
    print(*(f"  {lines:5d} {name}" for name, lines in sorted(long.items(), key=lambda item: -item[1])), sep="\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
