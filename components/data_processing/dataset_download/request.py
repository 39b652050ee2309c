"""``dataset_download``'s arguments, as its wrapper received them, into one :class:`~.run.DatasetDownloadRequest`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components._common.arguments import request_from_arguments
from components.data_processing.dataset_download.run import DatasetDownloadRequest

#: The output artifacts: written by the wrapper from the prepared dataset, not part of the request.
OUTPUTS = ("train_dataset", "eval_dataset", "report", "metrics")


def dataset_download_request(arguments: Mapping[str, Any]) -> DatasetDownloadRequest:
    """Every argument but the outputs, under its own name.

    Raises:
        TypeError: ``arguments`` lacks a field of the request, or has a name that is neither a field nor an output.
    """
    return request_from_arguments("dataset_download", DatasetDownloadRequest, arguments, OUTPUTS)
