"""The small variant of ``benchmarks/model_trip.py``: a 10 MB model, before (copied) and after (read in place)."""

import importlib.util
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[1] / "benchmarks" / "model_trip.py"
SIZE = 10**7


def _benchmark():
    spec = importlib.util.spec_from_file_location("model_trip", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_weights_stay_on_the_workspace(tmp_path, capsys):
    benchmark = _benchmark()
    results = benchmark.main(["--sizes", "0.01", "--root", str(tmp_path)])
    before, after = results[0.01]["before"], results[0.01]["after"]
    assert list(tmp_path.iterdir()) == []  # the models, copies and uploads are deleted
    # Before: the launcher uploads the copy, both readers download it; each step's disk holds the model.
    assert sum(step["store"] for step in before.values()) >= 3 * SIZE
    assert all(step["disk"] >= SIZE for step in before.values())
    # After: manifests, metrics and the report only; no step's disk holds the weights; S3 still gets every byte.
    assert sum(step["store"] for step in after.values()) <= benchmark.TARGET_STORE_FRACTION * SIZE
    assert all(step["disk"] <= 10**5 for step in after.values())
    assert after["train_model"]["workspace"] >= SIZE  # the job wrote the weights once, on the workspace
    assert after["lm_eval (fine-tuned)"]["read"] >= SIZE  # and the evaluation read them there
    assert after["model_registry (S3 upload)"]["s3"] > SIZE and before["model_registry (S3 upload)"]["s3"] > SIZE
    assert "0.01 GB after: artifact store" in capsys.readouterr().out
    assert benchmark.verdicts(results)[0].endswith("targets met")
