"""The request, the workspace check, the split and the component end to end (``python_func`` and ``kfp.local``)."""

from __future__ import annotations

import dataclasses
import inspect
import itertools
import json
from pathlib import Path

import pytest
from kfp import dsl

from components._common.dataset_metadata import read_dataset_metadata
from components.data_processing.dataset_download import dataset_download
from components.data_processing.dataset_download.request import GROUPS, OUTPUTS
from components.data_processing.dataset_download.request import dataset_download_request as build_request
from components.data_processing.dataset_download.run import run_dataset_download
from components.data_processing.dataset_download.split import JsonlWriter, SplitSink, plan_split
from components.data_processing.dataset_download.validation_report import DatasetValidationError
from pipelines.demo.demo_data import DEMO_DATASET_PATH
from tests.harness.requests import component_defaults, dataset_download_request, dataset_options, run_dataset_step

ROW = {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]}


def _rows(path: Path, n: int, bad: dict | None = None) -> Path:
    lines = [json.dumps({**ROW, "id": i}) for i in range(n)]
    if bad is not None:
        lines.insert(n // 2, json.dumps(bad))
    path.write_text("\n".join(lines) + "\n")
    return path


def _artifacts(tmp_path: Path) -> dict:
    return {
        "train_dataset": dsl.Dataset(uri=str(tmp_path / "out" / "train.jsonl")),
        "eval_dataset": dsl.Dataset(uri=str(tmp_path / "out" / "eval.jsonl")),
        "report": dsl.Markdown(uri=str(tmp_path / "out" / "report.md")),
        "metrics": dsl.Metrics(uri=str(tmp_path / "out" / "metrics.json")),
    }


def _run(tmp_path: Path, **kwargs) -> dict:
    artifacts = _artifacts(tmp_path)
    dataset_download.python_func(**artifacts, **kwargs)
    return artifacts


@pytest.mark.parametrize(
    "available,ratio,subset,expected",
    [
        (100, 0.9, 0, (100, 10)),
        (100, 1.0, 0, (100, 0)),
        (100, 0.8, 25, (25, 5)),
        (10, 0.99, 0, (10, 1)),
        (3, 0.01, 0, (3, 2)),
    ],
)
def test_split_plan_sizes(available, ratio, subset, expected):
    plan = plan_split(available, ratio, subset)
    assert (plan.rows_selected, plan.eval_rows) == expected and not plan.warnings


def test_split_plan_warnings_and_errors():
    assert plan_split(5, 0.9, 50).warnings == ("subset_count=50 > 5 valid rows: using all 5",)
    assert plan_split(1, 0.5, 0).eval_rows == 0
    for ratio in (0.0, 1.5, -0.1):
        with pytest.raises(ValueError, match=f"train_split_ratio={ratio} must be in \\(0, 1\\]"):
            dataset_options("split", train_split_ratio=ratio)
    with pytest.raises(ValueError, match="subset_count=-1 must be >= 0"):
        dataset_options("split", subset_count=-1)


def _split(tmp_path, name, lines, plan, seed):
    train, eval_ = JsonlWriter(tmp_path / f"{name}-train"), JsonlWriter(tmp_path / f"{name}-eval")
    sink = SplitSink(plan, seed, train, eval_, None)
    lines = iter(lines)
    while block := [line.rstrip(b"\n") for line in itertools.islice(lines, 4096)]:  # as the component's passes do
        sink(block)
    return train.commit(), eval_.commit()


def test_split_is_exact_disjoint_ordered_and_seeded(tmp_path):
    lines = [f"{i}\n".encode() for i in range(1000)]
    plan = plan_split(1000, 0.75, 400)
    train, eval_ = _split(tmp_path, "a", lines, plan, 42)
    again = _split(tmp_path, "b", lines, plan, 42)
    other = _split(tmp_path, "c", lines, plan, 43)
    train_ids = [int(x) for x in train.path.read_text().split()]
    eval_ids = [int(x) for x in eval_.path.read_text().split()]
    assert (len(train_ids), len(eval_ids)) == (300, 100) == (train.rows, eval_.rows)
    assert not set(train_ids) & set(eval_ids) and train_ids == sorted(train_ids)
    assert (again[0].sha256, again[1].sha256) == (train.sha256, eval_.sha256)
    assert other[0].sha256 != train.sha256
    assert min(eval_ids) < 300 and max(eval_ids) > 700  # drawn across the whole file, not a head/tail cut


def test_component_writes_split_metadata_report_and_metrics(tmp_path):
    source = _rows(tmp_path / "chat.jsonl", 40)
    out = _run(tmp_path, dataset_uri=str(source), train_split_ratio=0.75, subset_count=20, seed=7)
    train_rows = [json.loads(line) for line in Path(out["train_dataset"].path).read_text().splitlines()]
    eval_rows = [json.loads(line) for line in Path(out["eval_dataset"].path).read_text().splitlines()]
    assert (len(train_rows), len(eval_rows)) == (15, 5)
    assert all(row["messages"] == ROW["messages"] for row in train_rows + eval_rows)
    assert len({row["id"] for row in train_rows + eval_rows}) == 20  # extra keys kept, no duplicates
    meta = out["train_dataset"].metadata
    import hashlib

    assert meta["dataset_sha256"] == hashlib.sha256(Path(out["train_dataset"].path).read_bytes()).hexdigest()
    assert (meta["dataset_rows"], meta["dataset_format"], meta["dataset_uri"]) == (15, "messages", str(source))
    assert meta["dataset_revision"].startswith("mtime=") and out["eval_dataset"].metadata["dataset_rows"] == 5
    assert (meta["dataset_split"], out["eval_dataset"].metadata["dataset_split"]) == ("train", "eval")
    described = read_dataset_metadata(meta, "train_dataset")  # the one schema the readers decode
    assert described is not None and described.dataset_uri == str(source)
    assert out["metrics"].metadata["rows_read"] == 40 and out["metrics"].metadata["train_rows"] == 15
    report = Path(out["report"].path).read_text()
    assert "# Dataset validation: passed" in report and "Train: 15 rows" in report


def test_same_seed_gives_byte_identical_files_and_ratio_one_gives_empty_eval(tmp_path):
    source = _rows(tmp_path / "chat.jsonl", 50)
    first = _run(tmp_path / "a", dataset_uri=str(source), seed=3)
    second = _run(tmp_path / "b", dataset_uri=str(source), seed=3)
    for name in ("train_dataset", "eval_dataset"):
        assert Path(first[name].path).read_bytes() == Path(second[name].path).read_bytes()
    whole = _run(tmp_path / "c", dataset_uri=str(source), train_split_ratio=1.0)
    assert Path(whole["eval_dataset"].path).read_bytes() == b""
    assert whole["eval_dataset"].metadata["dataset_rows"] == 0 and whole["train_dataset"].metadata["dataset_rows"] == 50


def test_bad_rows_fail_and_leave_nothing_half_written(tmp_path):
    source = _rows(tmp_path / "chat.jsonl", 10, bad={"messages": [{"role": "user", "content": "only me"}]})
    with pytest.raises(DatasetValidationError, match=r"chat.jsonl:6 \[no_assistant_turn\]"):
        _run(tmp_path, dataset_uri=str(source))
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []
    dropped = _run(tmp_path, dataset_uri=str(source), on_invalid="drop", max_invalid_fraction=0.1)
    assert dropped["metrics"].metadata["rejected_no_assistant_turn"] == 1
    assert "| chat.jsonl:6 | `no_assistant_turn` |" in Path(dropped["report"].path).read_text()


def test_empty_dataset_and_bad_parameters_are_clear_errors(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="empty dataset"):
        _run(tmp_path, dataset_uri=str(tmp_path / "empty.jsonl"))
    source = _rows(tmp_path / "chat.jsonl", 3)
    with pytest.raises(ValueError, match="train_split_ratio=0.0 must be in"):
        _run(tmp_path, dataset_uri=str(source), train_split_ratio=0.0)
    with pytest.raises(ValueError, match="max_seq_len=-1 must be >= 0"):
        _run(tmp_path, dataset_uri=str(source), max_seq_len=-1)


def test_max_seq_len_without_a_tokenizer_computes_no_token_statistics(tmp_path):
    """Pipelines always pass the training max_seq_len; without a tokenizer the step validates and splits only."""
    out = _run(tmp_path, dataset_uri=str(_rows(tmp_path / "chat.jsonl", 3)), max_seq_len=64)
    assert out["metrics"].metadata["rows_valid"] == 3
    assert not [name for name in out["metrics"].metadata if name.startswith("token_")]


def test_token_statistics_with_the_tiny_tokenizer(tmp_path, tiny_model_dir, demo_dataset_path):
    out = _run(
        tmp_path,
        dataset_uri=str(demo_dataset_path),
        subset_count=60,
        max_seq_len=40,
        tokenizer_source=str(tiny_model_dir),
    )
    metrics = out["metrics"].metadata
    assert 0 < metrics["token_min"] <= metrics["token_p50"] <= metrics["token_p95"] <= metrics["token_max"]
    assert metrics["token_total"] >= 60 * metrics["token_min"]
    over = metrics["rows_over_max_seq_len"]
    assert 0 <= over <= 60 and ("longer than max_seq_len=40" in Path(out["report"].path).read_text()) == (over > 0)


def test_alpaca_from_http_through_kfp_local(kfp_local, http_file_server):
    rows = [{"instruction": f"Add {i} and 1.", "input": "", "output": f"{i + 1}", "id": i} for i in range(30)]
    (http_file_server.root / "alpaca.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = dataset_download(
        dataset_uri=http_file_server.url_for("alpaca.jsonl"), train_split_ratio=0.8, seed=1, subset_count=0
    )
    train, evaluation = task.outputs["train_dataset"], task.outputs["eval_dataset"]
    assert (train.metadata["dataset_rows"], evaluation.metadata["dataset_rows"]) == (24, 6)
    assert train.metadata["dataset_format"] == "alpaca" and len(train.metadata["dataset_revision"]) == 16
    first = json.loads(Path(train.path).read_text().splitlines()[0])
    assert first["messages"][1]["role"] == "assistant" and "id" in first
    assert "auto-detected `alpaca`" in Path(task.outputs["report"].path).read_text()


def test_sharegpt_prefix_from_s3_keeps_secrets_out_of_outputs(tmp_path, s3_data_connection):
    client, bucket = s3_data_connection
    rows = [
        {"conversations": [{"from": "human", "value": f"q{i}"}, {"from": "gpt", "value": f"a{i}"}]} for i in range(8)
    ]
    for part in range(2):
        body = "".join(json.dumps(r) + "\n" for r in rows[part * 4 : part * 4 + 4]).encode()
        client.put_object(Bucket=bucket, Key=f"chat/part-{part}.jsonl", Body=body)
    out = _run(tmp_path, dataset_uri=f"s3://{bucket}/chat/", train_split_ratio=0.75)
    meta = out["train_dataset"].metadata
    assert (meta["dataset_format"], meta["dataset_rows"]) == ("sharegpt", 6)
    written = Path(out["train_dataset"].path).read_text() + Path(out["eval_dataset"].path).read_text()
    questions = sorted(json.loads(line)["messages"][0]["content"] for line in written.splitlines())
    assert questions == [f"q{i}" for i in range(8)]
    everything = Path(out["report"].path).read_text() + json.dumps(out["train_dataset"].metadata)
    assert "test-secret-access-key" not in everything and "part-0.jsonl" in everything


def test_compiled_component_runs_on_the_step_image_with_its_wrapper_only(tmp_path):
    import yaml
    from kfp import compiler

    from components._common.images import STEP_IMAGE

    compiler.Compiler().compile(dataset_download, str(tmp_path / "component.yaml"))
    spec = yaml.safe_load((tmp_path / "component.yaml").read_text())
    container = next(iter(spec["deploymentSpec"]["executors"].values()))["container"]
    source = container["command"][-1]
    assert container["image"] == STEP_IMAGE and len(source.encode()) < 8 * 1024
    assert "run_dataset_download" in source and "__KFP_EMBEDDED_ARCHIVE_B64" not in source
    assert "pip install" not in " ".join(container["command"])


def test_prompt_completion_parquet_from_the_hub(tmp_path, hub_stub):
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    rows = [{"prompt": f"Say {i}.", "completion": f"{i}", "id": i} for i in range(12)]
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    repo = hub_stub.add("org/pc", {"README.md": b"# pc\n", "data/train-00000-of-00001.parquet": buffer.getvalue()})
    out = _run(tmp_path, dataset_uri="org/pc", train_split_ratio=0.75, seed=5)
    meta, held_out = out["train_dataset"].metadata, out["eval_dataset"].metadata["dataset_rows"]
    assert (meta["dataset_format"], meta["dataset_revision"], meta["dataset_rows"], held_out) == (
        "prompt_completion", repo.sha, 9, 3,
    )  # fmt: skip
    first = json.loads(Path(out["train_dataset"].path).read_text().splitlines()[0])
    say, answer = {"role": "user", "content": f"Say {first['id']}."}, {"role": "assistant", "content": str(first["id"])}
    assert first["messages"] == [say, answer]


def test_private_hub_repo_error_reaches_the_user_with_the_guides_string_and_words_intact(
    tmp_path, hub_stub, monkeypatch
):
    """Through the component's masking: ordinary words (``check``) are not masked, the token's value is."""
    hub_stub.add("org/private", {"train.jsonl": b'{"messages": []}\n'})
    hub_stub.required_token = "hf_rightTOKENvalue0123456789"
    monkeypatch.setenv("HF_TOKEN", "hf_wrongTOKENvalue0123456789")
    with pytest.raises(Exception) as error:
        _run(tmp_path, dataset_uri="org/private")
    message = str(error.value)
    assert "401 Unauthorized" in message and "hf-token secret" in message, message
    assert "check the name" in message, message  # not "*** the name"
    assert "hf_wrongTOKENvalue" not in message


def test_rows_that_are_not_chat_fail_with_the_guides_strings(tmp_path):
    """The RHOAI guide's "Invalid dataset format": `Expected chat format` / `messages field not found`."""
    data = tmp_path / "text.jsonl"
    data.write_text('{"text": "hello"}\n{"text": "again"}\n')
    with pytest.raises(DatasetValidationError) as error:
        _run(tmp_path, dataset_uri=str(data), input_format="messages")
    first_line = str(error.value).splitlines()[0]
    assert first_line.startswith("Expected chat format: 2 of 2 rows of"), first_line
    assert "[missing_field] messages field not found (no `messages` key)" in first_line, first_line


def test_a_workspace_that_is_not_writable_fails_the_first_step_in_one_line(tmp_path):
    not_a_directory = tmp_path / "workspace-file"
    not_a_directory.write_text("")
    request = dataset_download_request(str(DEMO_DATASET_PATH), pvc_path=str(not_a_directory))
    with pytest.raises(OSError) as error:
        run_dataset_download(request, tmp_path / "train", tmp_path / "eval")
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"dataset_download parameter pvc_path='{not_a_directory}'")
    assert "not writable here" in message and "PVC_STORAGE_CLASS" in message
    assert not (tmp_path / "train").exists() and not (tmp_path / "eval").exists()


def test_a_writable_workspace_is_left_as_it_was(tmp_path):
    workspace = tmp_path / "kfp-workspace"
    workspace.mkdir()
    run_dataset_step(str(DEMO_DATASET_PATH), tmp_path, pvc_path=str(workspace))
    assert list(workspace.iterdir()) == []  # the probe file is removed
    assert (tmp_path / "train.jsonl").exists()


PARAMETERS = inspect.signature(dataset_download.python_func).parameters
ARGUMENTS = {**component_defaults(dataset_download), **dict.fromkeys(OUTPUTS), "dataset_uri": "org/name"}


def test_every_argument_lands_in_one_group_under_its_own_name():
    request = build_request(ARGUMENTS)
    landed = {"pvc_path": request.pvc_path}
    for name in GROUPS:
        landed |= dataclasses.asdict(getattr(request, name))
    assert landed == {name: ARGUMENTS[name] for name in PARAMETERS if name not in OUTPUTS}
    assert {name for name, p in PARAMETERS.items() if "Output" in str(p.annotation)} == set(OUTPUTS)


def test_an_unknown_argument_is_one_line_naming_it():
    with pytest.raises(TypeError, match=r"^dataset_download: arguments \['sead'\] have no field") as raised:
        build_request({**ARGUMENTS, "sead": 1})
    assert "\n" not in str(raised.value)
