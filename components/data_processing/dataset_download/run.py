"""The component's work end to end: fetch, validate every row, split, count tokens, and describe the result.

:func:`run_dataset_download` writes the train and eval JSONL files (temporary names, renamed only when everything
succeeded) and returns a :class:`DatasetDownloadResult` from which the component takes artifact metadata, metrics
and the Markdown report.
"""

from __future__ import annotations

import json
import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components._common.dataset_metadata import DATASET_METADATA_VERSION, DatasetMetadata
from components._common.files import with_extension, write_text_atomically
from components._common.masking import mask_data, masked

from .locations import DatasetSourceError, check_dataset_uri
from .sources import fetch_dataset
from .split import JsonlWriter, SplitPlan, WrittenFile, check_split_options, plan_split, write_split
from .tokens import TokenStats, check_token_options, load_token_counter
from .validate import ValidationReport, check_validation_options, validate_local_files

LOG = logging.getLogger(__name__)


@dataclass
class DatasetDownloadResult:
    """What :func:`run_dataset_download` produced."""

    validation: ValidationReport
    plan: SplitPlan
    train: WrittenFile
    eval: WrittenFile
    seed: int
    token_stats: TokenStats | None = None
    warnings: list[str] = field(default_factory=list)

    def artifact_metadata(self, written: WrittenFile, split: str) -> DatasetMetadata:
        """Metadata of a dataset artifact (:mod:`components._common.dataset_metadata`): URI, revision, rows, ..."""
        return DatasetMetadata(
            dataset_metadata_version=DATASET_METADATA_VERSION,
            dataset_uri=self.validation.source_uri,
            dataset_revision=self.validation.revision,
            dataset_sha256=written.sha256,
            dataset_rows=written.rows,
            dataset_format=self.validation.input_format,
            dataset_split=split,
            dataset_split_seed=self.seed,
        )

    def metrics(self) -> dict[str, float]:
        """Row counts, rejects (total and per rule) and token statistics, for KFP ``Metrics``."""
        values: dict[str, float] = {
            "rows_read": self.validation.rows_read,
            "rows_valid": self.validation.rows_valid,
            "rows_rejected": self.validation.rows_rejected,
            "rows_selected": self.plan.rows_selected,
            "train_rows": self.train.rows,
            "eval_rows": self.eval.rows,
        }
        values.update({f"rejected_{rule}": n for rule, n in sorted(self.validation.rejects_by_rule.items())})
        if self.token_stats is not None:
            values.update(self.token_stats.summary())
        return values

    def write_outputs(self, train_dataset: Any, eval_dataset: Any, report: Any, metrics: Any) -> None:
        """Fills the component's output artifacts: dataset metadata, the Markdown report file and the metrics.

        Args:
            train_dataset: The ``Output[Dataset]`` of the train split (its file is already written).
            eval_dataset: The ``Output[Dataset]`` of the eval split.
            report: The ``Output[Markdown]``; :meth:`to_markdown` is written to its path.
            metrics: The ``Output[Metrics]``; each of :meth:`metrics` is logged.
        """
        train_dataset.metadata.update(
            mask_data(self.artifact_metadata(self.train, "train").to_metadata(), patterns=False)
        )
        eval_dataset.metadata.update(mask_data(self.artifact_metadata(self.eval, "eval").to_metadata(), patterns=False))
        write_text_atomically(with_extension(report, ".md"), self.to_markdown())  # secret values masked
        for name, value in self.metrics().items():
            metrics.log_metric(name, value)

    def to_markdown(self) -> str:
        """The report: validation (with every reject), the split, token statistics and warnings."""
        lines = [
            self.validation.to_markdown().rstrip("\n"),
            "",
            "## Split",
            "",
            f"- Seed: {self.seed}; rows kept: {self.plan.rows_selected} of {self.plan.rows_available} valid",
            f"- Train: {self.train.rows} rows, sha256 `{self.train.sha256}`",
            f"- Eval: {self.eval.rows} rows, sha256 `{self.eval.sha256}`",
        ]
        if self.token_stats is not None:
            summary = self.token_stats.summary()
            lines += ["", f"## Tokens (max_seq_len={self.token_stats.max_seq_len})", "", "| Statistic | Value |"]
            lines += ["|---|---:|"] + [f"| {name} | {value} |" for name, value in summary.items()]
        if self.warnings:
            lines += ["", "## Warnings", ""] + [f"- {warning}" for warning in self.warnings]
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class DatasetDownloadRequest:
    """``dataset_download``'s arguments, as the component received them; no defaults (they live in the component).

    Attributes:
        dataset_uri: Hub id ``org/name[:subset][@revision]``, ``s3://``, ``http(s)://``, ``pvc://`` or a local path.
        train_split_ratio: Fraction of the kept rows for training, in (0, 1].
        subset_count: Rows to keep, drawn with ``seed`` (0 = all).
        seed: Seed of the subset and the split.
        input_format: ``auto`` | ``messages`` | ``alpaca`` | ``sharegpt`` | ``prompt_completion``.
        hf_split: The split of a Hub dataset to read.
        on_invalid: ``fail`` on any bad row, or ``drop`` bad rows (failing above ``max_invalid_fraction``).
        max_invalid_fraction: With ``drop``, the largest rejected fraction accepted.
        allow_trailing_user: Accept conversations that end on a user turn.
        max_seq_len: With ``tokenizer_source``, compute token statistics and count rows longer than this (0 = off).
        tokenizer_source: HF id or local directory of the tokenizer for token statistics.
        max_download_bytes: Refuse remote downloads larger than this.
    """

    dataset_uri: str
    train_split_ratio: float
    subset_count: int
    seed: int
    input_format: str
    hf_split: str
    on_invalid: str
    max_invalid_fraction: float
    allow_trailing_user: bool
    max_seq_len: int
    tokenizer_source: str
    max_download_bytes: int


@masked
def run_dataset_download(request: DatasetDownloadRequest, train_path: Path, eval_path: Path) -> DatasetDownloadResult:
    """Fetches a dataset, validates every row, and writes a seeded train/eval split as chat ``messages`` JSONL.

    Args:
        request: The component's arguments.
        train_path: Where the train JSONL goes.
        eval_path: Where the eval JSONL goes (an empty file when ``train_split_ratio`` is 1.0).

    Returns:
        The validation report, split plan, written files and token statistics.

    Raises:
        ValueError: Bad parameters; :class:`~.locations.DatasetSourceError` for source problems and empty datasets;
            :class:`~.validate.DatasetValidationError` for rows beyond what ``on_invalid`` allows.
    """
    dataset_uri, seed, max_seq_len = request.dataset_uri, request.seed, request.max_seq_len
    train_split_ratio, subset_count = request.train_split_ratio, request.subset_count
    on_invalid, max_invalid_fraction = request.on_invalid, request.max_invalid_fraction
    tokenizer_source = request.tokenizer_source
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    check_dataset_uri(dataset_uri)
    check_split_options(train_split_ratio, subset_count)
    check_validation_options(on_invalid, max_invalid_fraction)
    with_token_stats = check_token_options(max_seq_len, tokenizer_source)
    if not with_token_stats and (tokenizer_source or max_seq_len):
        LOG.info("token statistics need both max_seq_len > 0 and tokenizer_source: none computed")
    with tempfile.TemporaryDirectory(prefix="dataset-download-") as scratch:
        fetched = fetch_dataset(dataset_uri, Path(scratch) / "download", request.hf_split, request.max_download_bytes)
        normalized = Path(scratch) / "normalized.jsonl"
        with open(normalized, "wb") as sink_file:

            def sink(row: bytes) -> None:
                sink_file.write(row + b"\n")

            report = validate_local_files(
                fetched.files,
                dataset_uri,
                fetched.revision,
                request.input_format,
                on_invalid,
                max_invalid_fraction,
                request.allow_trailing_user,
                sink,
            )
        LOG.info(
            "%s: %s; %d rows read, %d valid", dataset_uri, report.format_reason, report.rows_read, report.rows_valid
        )
        report.raise_for_rejects()
        if report.rows_valid == 0:
            raise DatasetSourceError(f"dataset_uri={dataset_uri!r}: empty dataset (no valid rows in {report.files})")
        plan = plan_split(report.rows_valid, train_split_ratio, subset_count)
        for warning in plan.warnings:
            LOG.warning(warning)
        token_stats = TokenStats(max_seq_len) if with_token_stats else None
        on_selected = None
        if token_stats is not None:
            count_tokens = load_token_counter(tokenizer_source)

            def on_selected(line: bytes) -> None:
                token_stats.add(count_tokens(json.loads(line)["messages"]))

        train, eval_ = JsonlWriter(train_path), JsonlWriter(eval_path)
        try:
            with open(normalized, "rb") as lines:
                write_split(lines, plan, seed, train, eval_, on_selected)
        except BaseException:
            train.discard()
            eval_.discard()
            raise
        written_train, written_eval = train.commit(), eval_.commit()
    warnings = list(plan.warnings)
    if token_stats is not None and token_stats.rows_over_max_seq_len:
        warnings.append(f"{token_stats.rows_over_max_seq_len} rows are longer than max_seq_len={max_seq_len} tokens")
    return DatasetDownloadResult(report, plan, written_train, written_eval, seed, token_stats, warnings)
