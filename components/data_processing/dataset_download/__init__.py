"""Dataset component: download, convert, validate every row and split, with a report.

``dataset_download`` (the KFP component) is imported on first use, so that the pure modules (``run``,
``validate``...) import without ``kfp``: ``kfp-finetune validate-dataset`` starts in a fraction of the time.
"""

from __future__ import annotations

from typing import Any

__all__ = ["dataset_download"]


def __getattr__(name: str) -> Any:
    if name == "dataset_download":
        from .component import dataset_download

        return dataset_download
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
