"""Times importing and compiling all six fine-tuning pipelines (target: < 3 s in total).

Usage: ``python benchmarks/compile.py [--write-figures]``. Prints the import time, each compile time and the total;
``--write-figures`` records the total and the first compile in ``docs/figures.json`` (``scripts/figures.py``).
"""

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    """Imports the pipeline modules, compiles each once and prints the timings."""
    started = time.perf_counter()
    from pipelines.compile import compile_named
    from pipelines.training.finetuning import PIPELINES
    from pipelines.training.finetuning.settings import CompileSettings

    settings = CompileSettings.from_env()
    imported = time.perf_counter()
    print(f"import: {imported - started:.2f}s (kfp and the components are imported by the first compile)")
    compiles = []
    with tempfile.TemporaryDirectory() as workdir:
        for name in PIPELINES:
            before = time.perf_counter()
            compile_named(name, Path(workdir) / f"{name}.yaml", settings)
            compiles.append(time.perf_counter() - before)
            print(f"compile {name}: {compiles[-1]:.2f}s")
    total = time.perf_counter() - started
    print(f"total: {total:.2f}s (target < 3 s: {'met' if total < 3 else 'NOT met'})")
    if "--write-figures" in sys.argv:
        from scripts.figures import figure, record

        first = compiles[0] + imported - started
        found = {
            "compile.total_seconds": figure(round(total, 2), "s", f"{total:.2f}"),
            "compile.first_seconds": figure(round(first, 2), "s", f"{first:.2f}"),
        }
        record(found, "benchmarks/compile.py")


if __name__ == "__main__":
    main()
