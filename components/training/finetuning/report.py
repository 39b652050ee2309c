"""The training report: the summary metrics, and the HTML page (loss curve PNG, summary, hyper-parameters, TrainJob)."""

from __future__ import annotations

import base64
import html
import io
from typing import Any


def summarize(records: list[dict[str, Any]], train_seconds: float | None = None) -> dict[str, float]:
    """The KFP metrics of a run: final and minimum loss, steps, training time and the last tokens/s logged."""
    if not records:
        raise ValueError("no step records to summarise")
    summary = {
        "final_loss": float(records[-1]["loss"]),
        "min_loss": float(min(record["loss"] for record in records)),
        "steps": float(max(record["step"] for record in records)),
    }
    seconds = train_seconds if train_seconds is not None else records[-1].get("time")
    if seconds is not None:
        summary["train_seconds"] = float(seconds)
    rates = [record["tokens_per_second"] for record in records if record.get("tokens_per_second") is not None]
    if rates:
        summary["tokens_per_second"] = float(rates[-1])
    return summary


def loss_curve_png(records: list[dict[str, Any]], title: str = "Training loss") -> bytes:
    """The PNG of loss (and learning rate, on a second axis, when logged) against step."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 3.5), dpi=100)
    axes = figure.add_subplot()
    steps = [record["step"] for record in records]
    axes.plot(steps, [record["loss"] for record in records], color="tab:blue", marker="." if len(steps) < 60 else "")
    axes.set_xlabel("step")
    axes.set_ylabel("loss", color="tab:blue")
    axes.set_title(title)
    axes.grid(alpha=0.3)
    lr_records = [record for record in records if record.get("lr") is not None]
    if lr_records:
        lr_axes = axes.twinx()
        lr_axes.plot([r["step"] for r in lr_records], [r["lr"] for r in lr_records], color="tab:orange", alpha=0.6)
        lr_axes.set_ylabel("learning rate", color="tab:orange")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _table(rows: dict[str, Any]) -> str:
    cells = "".join(
        f"<tr><th>{html.escape(str(key))}</th><td>{html.escape(str(value))}</td></tr>" for key, value in rows.items()
    )
    return f"<table>{cells}</table>"


#: Hyper-parameters that only one algorithm uses; the report leaves them out of the others'.
ALGORITHM_ONLY_SETTINGS = {
    "unfreeze_rank_ratio": "osft",
    "lora_r": "lora",
    "lora_alpha": "lora",
    "lora_dropout": "lora",
    "fsdp_sharding_strategy": "sft",
}


def render_report(
    records: list[dict[str, Any]],
    summary: dict[str, float],
    hyperparameters: dict[str, Any],
    run_facts: dict[str, Any],
) -> str:
    """The report as one self-contained HTML page (``run_facts`` needs ``algorithm`` and ``base_model``)."""
    title = f"{run_facts['algorithm']} of {run_facts['base_model']}"
    algorithm = str(run_facts["algorithm"]).lower()  # another algorithm's knobs are left out
    settings = {k: v for k, v in hyperparameters.items() if ALGORITHM_ONLY_SETTINGS.get(k, algorithm) == algorithm}
    image = base64.b64encode(loss_curve_png(records, title=f"Loss: {title}")).decode("ascii")
    style = (
        "body{font-family:sans-serif;margin:2em}th{text-align:left;padding-right:1em}"
        "td,th{border-bottom:1px solid #ddd}"
    )
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{style}</style></head><body>"
        f"<h1>Fine-tuning report: {html.escape(title)}</h1>"
        f"<h2>Run</h2>{_table(run_facts)}"
        f"<h2>Loss curve</h2><img alt='loss curve' src='data:image/png;base64,{image}'>"
        f"<h2>Summary</h2>{_table({key: f'{value:.6g}' for key, value in summary.items()})}"
        f"<h2>Hyper-parameters</h2>{_table(settings)}"
        "</body></html>\n"
    )
