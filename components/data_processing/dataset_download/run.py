"""The component's work end to end: fetch, validate every row, split, count tokens, and describe the result."""

from __future__ import annotations

import copy
import json
import logging
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components._common.chat_files import count_lines
from components._common.dataset_metadata import DATASET_METADATA_VERSION, DatasetMetadata
from components._common.files import with_extension, write_text_atomically
from components._common.masking import mask_data, masked
from components._common.reward_rows import REWARD_FORMATS, prompt_messages
from components._common.workspace import check_workspace

from .readers import data_format
from .request import DatasetDownloadRequest
from .sources import fetch_dataset
from .split import SplitPlan, WrittenFile, validate_and_split, write_error
from .tokens import TokenStats, load_token_counter
from .validate import start_report, validate_files
from .validation_report import ValidationReport

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
        """Fills the output artifacts: dataset metadata (``_common.dataset_metadata``), the report, the metrics."""
        for artifact, written, split in ((train_dataset, self.train, "train"), (eval_dataset, self.eval, "eval")):
            described = DatasetMetadata(
                dataset_metadata_version=DATASET_METADATA_VERSION,
                dataset_uri=self.validation.source_uri,
                dataset_revision=self.validation.revision,
                dataset_sha256=written.sha256,
                dataset_rows=written.rows,
                dataset_format=self.validation.input_format,
                dataset_split=split,
                dataset_split_seed=self.seed,
            )
            artifact.metadata.update(mask_data(described.to_metadata(), patterns=False))
        report_path = with_extension(report, ".md")
        try:
            write_text_atomically(report_path, self.to_markdown())  # secret values and URL signatures masked
        except OSError as error:
            raise write_error(Path(report_path), error) from None
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


@masked
def run_dataset_download(request: DatasetDownloadRequest, train_path: Path, eval_path: Path) -> DatasetDownloadResult:
    """Fetches a dataset, validates every row, and writes a seeded train/eval split as chat ``messages`` JSONL.

    Raises:
        ValueError: ``DatasetSourceError`` (source, empty dataset) or ``DatasetValidationError`` (rejected rows).
    """
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")  # no-op once configured
    check_workspace(request.pvc_path, "dataset_download")
    options, tokens = request.validation, request.tokens
    if not tokens.enabled and (tokens.tokenizer_source or tokens.max_seq_len):
        LOG.info("token statistics need both max_seq_len > 0 and tokenizer_source: none computed")
    token_stats: TokenStats | None = None

    def on_selected() -> Callable[[bytes], None] | None:
        """Token counting for the kept rows; the tokenizer loads only once the rows have passed (two passes)."""
        nonlocal token_stats
        if not tokens.enabled:
            return None
        count_tokens = load_token_counter(tokens.tokenizer_source)
        stats = token_stats = TokenStats(tokens.max_seq_len)
        if empty.input_format in REWARD_FORMATS:  # GRPO's prompt rows: the prompt's tokens
            return lambda line: stats.add(count_tokens(prompt_messages(json.loads(line))))
        return lambda line: stats.add(count_tokens(json.loads(line)["messages"]))

    with tempfile.TemporaryDirectory(prefix="dataset-download-") as scratch:
        fetched = fetch_dataset(request.source, Path(scratch) / "download")
        # the URI masked: signed URLs keep their signatures out of the report and the metadata
        empty = start_report(fetched.files, request.source.dataset_uri, options, fetched.revision)

        def validate(sink: Callable[[list[bytes]], None]) -> ValidationReport:
            return validate_files(fetched.files, copy.deepcopy(empty), options, sink)

        one_pass = not tokens.enabled and empty.input_format == "messages"  # with tokens: count once rows passed
        one_pass = one_pass and all(data_format(path) == "jsonl" for path in fetched.files)
        lines = sum(count_lines(path, options.limits) for path in fetched.files) if one_pass else 0
        targets = (train_path, eval_path)
        outcome = validate_and_split(validate, request.split, targets, Path(scratch), on_selected, lines)
    report, plan = outcome.report, outcome.plan
    LOG.info(
        "%s: %s; %d rows read, %d valid", report.source_uri, report.format_reason, report.rows_read, report.rows_valid
    )
    for warning in plan.warnings:
        LOG.warning(warning)
    warnings = list(plan.warnings)
    if token_stats is not None and token_stats.rows_over_max_seq_len:
        over = token_stats.rows_over_max_seq_len
        warnings.append(f"{over} rows are longer than max_seq_len={tokens.max_seq_len} tokens")
    return DatasetDownloadResult(report, plan, outcome.train, outcome.eval, request.split.seed, token_stats, warnings)
