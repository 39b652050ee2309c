"""Dataset component: download, convert, validate every row and split, with a report."""

from .component import dataset_download

__all__ = ["dataset_download"]
