"""Dataset component: download, convert, validate every row and split, with a report.

``dataset_download`` is imported on first use, so that the pure modules import without ``kfp``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["dataset_download"]


def __getattr__(name: str) -> Any:
    if name == "dataset_download":
        from .component import dataset_download

        return dataset_download
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
