"""Benchmark: the dataset step's bounded Parquet reader against pyarrow's plain ``iter_batches().to_pylist()``.

The reader (``components/data_processing/dataset_download/readers.py``) reads string columns as Arrow
dictionaries so that each row's decoded size is known before it is materialised (a dictionary-encoded value repeated
by index can make a 1 KiB file decode to gigabytes). That costs time on files whose strings are mostly distinct (the
dictionary is built from their plain pages): this prints the same-run ratio on ``--rows`` distinct chat rows, in
``--rounds`` interleaved rounds, and the peak RSS growth of reading a one-row bomb (4,800 x 1 MiB) with the reader.

Usage: ``python benchmarks/parquet_decode.py [--rows N] [--rounds R]``
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    """Prints the medians, their ratio, and the bomb's peak RSS growth."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from components._common.chat_files import ReadLimits
    from components.data_processing.dataset_download.readers import iter_parquet_rows

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    limits = ReadLimits(max_line_bytes=16 << 20, max_decompressed_bytes=32 << 30)
    with tempfile.TemporaryDirectory() as work:
        path = Path(work) / "rows.parquet"
        rows = [
            {
                "messages": [
                    {"role": "user", "content": f"question {i} " * 5},
                    {"role": "assistant", "content": f"{i} " * 20},
                ]
            }
            for i in range(options.rows)
        ]
        pq.write_table(pa.Table.from_pylist(rows), path)
        timings: dict[str, list[float]] = {"bounded": [], "plain": []}
        for _ in range(options.rounds):
            began = time.process_time()
            count = sum(1 for _ in iter_parquet_rows(path, limits))
            timings["bounded"].append(time.process_time() - began)
            began = time.process_time()
            plain = sum(len(batch.to_pylist()) for batch in pq.ParquetFile(path).iter_batches(batch_size=512))
            timings["plain"].append(time.process_time() - began)
            assert count == plain == options.rows
        bounded, plain_s = statistics.median(timings["bounded"]), statistics.median(timings["plain"])
        print(f"parquet: {options.rows} rows: bounded reader {bounded:.2f} s CPU, plain to_pylist {plain_s:.2f} s CPU")
        print(f"parquet: bounded / plain = {bounded / plain_s:.1f}x (same run, median of {options.rounds})")
        bomb = Path(work) / "bomb.parquet"
        indices = pa.array([0] * 4800, pa.int32())
        content = pa.DictionaryArray.from_arrays(indices, pa.array(["a" * (1 << 20)]))
        role = pa.DictionaryArray.from_arrays(indices, pa.array(["user"]))
        struct = pa.StructArray.from_arrays([role, content], names=["role", "content"])
        pq.write_table(pa.table({"messages": pa.ListArray.from_arrays(pa.array([0, 4800], pa.int32()), struct)}), bomb)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        (rejected,) = list(iter_parquet_rows(bomb, limits))
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
        print(
            f"parquet: a {bomb.stat().st_size}-byte bomb (4.7 GiB decoded): {rejected[1].rule}, peak RSS +{grown} MiB"
        )


if __name__ == "__main__":
    main()
