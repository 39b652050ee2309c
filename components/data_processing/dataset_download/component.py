"""KFP component ``dataset_download``: fetch a chat dataset, validate every row, write a seeded train/eval split."""

from kfp import dsl

from components._common.runtime import runtime_component
from components.data_processing.dataset_download.parameter_docs import PARAMETER_DOCS


@runtime_component(parameter_docs=PARAMETER_DOCS)
def dataset_download(
    dataset_uri: str,
    train_dataset: dsl.Output[dsl.Dataset],
    eval_dataset: dsl.Output[dsl.Dataset],
    report: dsl.Output[dsl.Markdown],
    metrics: dsl.Output[dsl.Metrics],
    train_split_ratio: float = 0.9,
    subset_count: int = 0,
    seed: int = 42,
    input_format: str = "auto",
    hf_split: str = "train",
    on_invalid: str = "fail",
    max_invalid_fraction: float = 0.0,
    allow_trailing_user: bool = False,
    max_seq_len: int = 0,
    tokenizer_source: str = "",
    max_download_bytes: int = 10737418240,
    max_line_bytes: int = 16777216,
    max_decompressed_bytes: int = 34359738368,
    download_deadline_s: float = 10800.0,
    pvc_path: str = "",
) -> None:
    """Downloads a chat dataset, validates every row, converts it to ``messages`` JSONL and splits it (seeded)."""
    arguments = dict(locals())  # every argument by name, taken before the imports below add names
    from pathlib import Path

    from components._common.termination import sigterm_raises_exit
    from components.data_processing.dataset_download.request import dataset_download_request
    from components.data_processing.dataset_download.run import run_dataset_download

    request = dataset_download_request(arguments)
    with sigterm_raises_exit():  # a stopped pod still removes its partial downloads and temporary files
        prepared = run_dataset_download(request, Path(train_dataset.path), Path(eval_dataset.path))
    prepared.write_outputs(train_dataset, eval_dataset, report, metrics)
