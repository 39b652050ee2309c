"""``dataset_download``'s request: its arguments in four typed option groups, each checked when it is built.

Every argument keeps its name in its group (``hf_split`` -> ``request.source.hf_split``); no field has a default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from components._common import arguments
from components._common.chat_files import ReadLimits

from .formats import FORMATS
from .locations import check_dataset_uri
from .validation_report import ON_INVALID


def _refuse(name: str, value: object, rule: str) -> None:
    raise ValueError(f"{name}={value!r} {rule}")


@dataclasses.dataclass(frozen=True)
class SourceOptions:
    """Where the data comes from, and the bounds of its download."""

    dataset_uri: str
    hf_split: str
    max_download_bytes: int
    download_deadline_s: float

    def __post_init__(self) -> None:
        check_dataset_uri(self.dataset_uri)
        if self.max_download_bytes <= 0:
            _refuse("max_download_bytes", self.max_download_bytes, "must be positive")
        deadline = self.download_deadline_s
        if isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or not deadline > 0:
            _refuse("download_deadline_s", deadline, "must be > 0 (seconds for the whole download)")


@dataclasses.dataclass(frozen=True)
class ValidationOptions:
    """How rows are read and judged: the format, what a bad row does, the size bounds."""

    input_format: str
    on_invalid: str
    max_invalid_fraction: float
    allow_trailing_user: bool
    max_line_bytes: int
    max_decompressed_bytes: int

    def __post_init__(self) -> None:
        if self.input_format != "auto" and self.input_format not in FORMATS:
            _refuse("input_format", self.input_format, f"is not one of: auto, {', '.join(FORMATS)}")
        if self.on_invalid not in ON_INVALID:
            _refuse("on_invalid", self.on_invalid, f"is not one of: {', '.join(ON_INVALID)}")
        if not 0.0 <= self.max_invalid_fraction <= 1.0:
            _refuse("max_invalid_fraction", self.max_invalid_fraction, "must be within [0, 1]")
        ReadLimits(self.max_line_bytes, self.max_decompressed_bytes)  # checks the two bounds

    @property
    def limits(self) -> ReadLimits:
        """The size bounds of reading the files."""
        return ReadLimits(self.max_line_bytes, self.max_decompressed_bytes)


@dataclasses.dataclass(frozen=True)
class SplitOptions:
    """The seeded subset and train/eval split."""

    train_split_ratio: float
    subset_count: int
    seed: int

    def __post_init__(self) -> None:
        if not 0.0 < self.train_split_ratio <= 1.0:
            _refuse("train_split_ratio", self.train_split_ratio, "must be in (0, 1] (1.0 = no eval split)")
        if self.subset_count < 0:
            _refuse("subset_count", self.subset_count, "must be >= 0 (0 = all rows)")


@dataclasses.dataclass(frozen=True)
class TokenOptions:
    """Token statistics: computed only with both ``max_seq_len`` > 0 and a ``tokenizer_source``."""

    max_seq_len: int
    tokenizer_source: str

    def __post_init__(self) -> None:
        if self.max_seq_len < 0:
            _refuse("max_seq_len", self.max_seq_len, "must be >= 0 (0 = no token statistics)")

    @property
    def enabled(self) -> bool:
        """Whether token statistics are computed."""
        return bool(self.max_seq_len and self.tokenizer_source)


@dataclasses.dataclass(frozen=True)
class DatasetDownloadRequest:
    """``dataset_download``'s arguments in groups (:func:`dataset_download_request`)."""

    pvc_path: str
    source: SourceOptions
    validation: ValidationOptions
    split: SplitOptions
    tokens: TokenOptions


#: Each group of the request: its type, and the prefix of its parameters (none).
GROUPS: dict[str, tuple[type, str]] = {
    "source": (SourceOptions, ""),
    "validation": (ValidationOptions, ""),
    "split": (SplitOptions, ""),
    "tokens": (TokenOptions, ""),
}
#: The output artifacts, written by the wrapper: not part of the request.
OUTPUTS = ("train_dataset", "eval_dataset", "report", "metrics")


def dataset_download_request(values: Mapping[str, Any]) -> DatasetDownloadRequest:
    """``dataset_download``'s arguments (the wrapper's ``dict(locals())``) but the outputs, each in its group.

    Raises:
        TypeError: ``values`` lacks a parameter of the request, or has a name that is neither one nor an output.
        ValueError: A value breaks its group's rule (:class:`~.locations.DatasetSourceError` for ``dataset_uri``).
    """
    return arguments.grouped_request("dataset_download", DatasetDownloadRequest, GROUPS, values, OUTPUTS)
