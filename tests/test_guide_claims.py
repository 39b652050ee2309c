"""The claim-by-claim pass of the RHOAI guide (``docs/guide-claims.md``) stays true to the tests it cites.

Every test id the table names exists, every PASS names one, the counts are the rows'; the rest checks claims no other
test covers.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from pipelines.compile import pipeline_function
from pipelines.training.finetuning import PIPELINES
from pipelines.training.finetuning.interface import REQUIRED, pipeline_parameters
from tests.harness.compiled import pipeline_documents

REPO_ROOT = Path(__file__).resolve().parents[1]
CLAIMS = REPO_ROOT / "docs/guide-claims.md"
FACTS = yaml.safe_load((REPO_ROOT / "tests/specs/guide/rhoai_guide_facts.yaml").read_text())
STATUSES = ("PASS", "PARTIAL (outside the project)", "PARTIAL (fixable)", "FAIL")
TEST_ID = re.compile(r"((?:[\w.-]+/)*test_\w+\.py)::(test_\w+)(?:\[[^\]`]*\])?")
ROW = re.compile(r"^\|\s*(\d+)\s*\|")
COUNTS = re.compile(r"^\*\*(Now|Before this pass's fixes):\*\* (.+)$", re.M)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def claim_rows(text: str) -> list[dict[str, str]]:
    """The table's rows: number, section, claim, status, status before this pass's fixes, evidence."""
    keys = ("number", "section", "claim", "status", "before", "evidence")
    rows = [dict(zip(keys, _cells(line), strict=True)) for line in text.splitlines() if ROW.match(line)]
    for row in rows:
        row["before"] = row["before"] or row["status"]
    return rows


def counts_line(statuses: list[str]) -> str:
    """``PASS n · PARTIAL (outside the project) n · PARTIAL (fixable) n · FAIL n · claims n``."""
    parts = [f"{status} {statuses.count(status)}" for status in STATUSES]
    return " · ".join([*parts, f"claims {len(statuses)}"])


@functools.cache
def _defined_tests(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text())
    return frozenset(node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)))


def missing_tests(evidence: str) -> list[str]:
    """The test ids named in ``evidence`` whose file or module-level test function does not exist."""
    missing = []
    for match in TEST_ID.finditer(evidence):
        path, name = REPO_ROOT / match.group(1), match.group(2)
        if not path.is_file() or name not in _defined_tests(path):
            missing.append(match.group(0))
    return missing


def test_the_claims_table_names_only_tests_that_exist_and_counts_its_rows():
    text = CLAIMS.read_text()
    rows = claim_rows(text)
    assert len(rows) >= 73, f"{len(rows)} rows: the table was not parsed (the previous pass counted 73 claims)"
    assert [row["number"] for row in rows] == [str(n) for n in range(1, len(rows) + 1)], "rows are numbered 1..N"
    for row in rows:
        assert row["status"] in STATUSES and row["before"] in STATUSES, row
        assert row["evidence"], f"claim {row['number']} has no evidence"
        assert not missing_tests(row["evidence"]), (
            f"claim {row['number']} names no such test: {missing_tests(row['evidence'])}"
        )
        if row["status"] == "PASS":
            assert TEST_ID.search(row["evidence"]), f"claim {row['number']} is PASS without a test"
    counts = dict(COUNTS.findall(text))
    assert counts.get("Now") == counts_line([row["status"] for row in rows]), counts
    assert counts.get("Before this pass's fixes") == counts_line([row["before"] for row in rows]), counts
    assert not missing_tests(text), f"the document names no such test: {missing_tests(text)}"
    # The pass's goal: nothing left that this project can change.
    assert not [row["number"] for row in rows if row["status"] in ("PARTIAL (fixable)", "FAIL")]


def test_the_table_checker_notices_a_test_that_does_not_exist():
    assert missing_tests("`tests/test_guide.py::test_the_guides_components_are_where_it_links_them`") == []
    assert (
        missing_tests("`tests/test_gpu_demand.py::test_default_run_peak_gpu_demand_fits_the_guides_table[sft]`") == []
    )
    assert missing_tests("`tests/test_guide.py::test_no_such_thing`") == ["tests/test_guide.py::test_no_such_thing"]
    assert missing_tests("`tests/test_nowhere.py::test_x[a]`") == ["tests/test_nowhere.py::test_x[a]"]
    row = "| 1 | S | c | PASS | | `tests/test_guide.py::test_x` |"
    assert claim_rows(row)[0]["before"] == "PASS" and counts_line(["PASS", "FAIL"]).endswith("FAIL 1 · claims 2")


#: "Optional Secrets": which steps use each secret (the executors of the compiled pipeline); the registry also reads
#: s3-secret (its S3 upload).
SECRET_USERS = {
    "kubernetes-credentials": {"exec-train-model"},
    "s3-secret": {"exec-dataset-download", "exec-model-registry"},
    "hf-token": {"exec-dataset-download", "exec-train-model", "exec-lm-eval", "exec-lm-eval-2"},
    "oci-pull-secret-model-download": {"exec-train-model"},
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_each_secret_reaches_the_steps_the_guide_names_with_its_keys(name, shipped_pipeline_yamls):
    """... as optional env vars: only the guide's one required secret may be required; the training step gets all."""
    documents = pipeline_documents(shipped_pipeline_yamls[name])
    executors = documents[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert set(SECRET_USERS) == set(FACTS["secrets"])
    for secret, users in SECRET_USERS.items():
        for executor in users & set(executors):  # the GRPO pipelines have no evaluation step
            mounts = [m for m in executors[executor].get("secretAsEnv", []) if m["secretName"] == secret]
            keys = {item["secretKey"] for mount in mounts for item in mount["keyToEnv"]}
            assert set(FACTS["secrets"][secret]) <= keys, (name, executor, secret, keys)
    training = {(mount["secretName"], mount["optional"]) for mount in executors["exec-train-model"]["secretAsEnv"]}
    assert training == {(secret, True) for secret in FACTS["secrets"]}
    for executor in executors.values():
        for mount in executor.get("secretAsEnv", []):
            assert mount.get("optional", False) or mount["secretName"] == FACTS["required_secret"], (name, mount)


#: Quick Start, step 4: "Other parameters are optional, ranging from dataset subset size, base model, fine-tuning
#: number of workers, batch size, to lm-eval evaluation tasks or model registry" (and step 5: version, model name and
#: registry address).
QUICK_START_OPTIONAL = (
    "phase_01_dataset_opt_subset",
    "phase_02_train_man_train_model",
    "phase_02_train_man_train_workers",
    "phase_02_train_man_train_batch",
    "phase_03_eval_man_eval_tasks",
    "phase_04_registry_man_address",
    "phase_04_registry_man_reg_name",
    "phase_04_registry_man_reg_version",
)


@pytest.mark.parametrize("name", ["osft-minimal", "sft-minimal"])
def test_the_minimal_flavours_expose_the_quick_starts_optional_parameters(name):
    parameters = {p.name: p for p in pipeline_parameters(pipeline_function(name))}
    for parameter in QUICK_START_OPTIONAL:
        assert parameter in parameters, (name, parameter)
        assert parameters[parameter].default is not REQUIRED, (name, parameter)
    assert parameters["phase_01_dataset_opt_subset"].default == 0  # "all" unless a subset (e.g. 2000) is asked for


def test_every_flavour_of_the_guide_evaluates_only_arc_easy_by_default():
    """Quick Start, step 5: "by default, evaluation performs only the arc_easy task"."""
    for name in FACTS["pipelines"]:
        parameters = {p.name: p for p in pipeline_parameters(pipeline_function(name))}
        assert parameters["phase_03_eval_man_eval_tasks"].default == FACTS["default_eval_tasks"], name


def test_the_compiled_yaml_is_generated_and_never_committed():
    """Quick Start, step 1: "The compiled pipeline YAML is not included in the repository"."""
    path = FACTS["quick_start"]["compiled_path"]
    ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=REPO_ROOT, check=False)
    assert ignored.returncode == 0, f"{path} is not git-ignored"
    tracked = subprocess.run(
        ["git", "ls-files", "pipelines/training"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked and not [file for file in tracked if file.endswith("pipeline.yaml")]


def test_the_guides_python_floor_is_the_projects():
    """Quick Start, step 1: "Python 3.11+" (this machine has 3.11 only; later interpreters are not tried here)."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.11"
    assert sys.version_info[:2] >= (3, 11)
