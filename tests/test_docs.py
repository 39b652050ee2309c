"""Component-hub conventions: metadata.yaml schema, generated READMEs current, docstrings everywhere."""

from pathlib import Path

import pytest

from scripts import generate_readme, validate_metadata

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_every_component_and_pipeline_has_valid_metadata():
    files = validate_metadata.metadata_files()
    directories = {path.parent.relative_to(REPO_ROOT).as_posix() for path in files}
    assert set(generate_readme.COMPONENTS) <= directories
    assert len([d for d in directories if d.startswith("pipelines/")]) == 8  # the guide's six, grpo, lora-grpo
    assert validate_metadata.main([]) == 0


def test_validator_rejects_a_broken_metadata_file():
    problems = validate_metadata.problems_in(REPO_ROOT / "tests/fixtures/broken_metadata.yaml")
    fields = {problem.split(": ")[1] for problem in problems}
    assert fields == {"name", "description", "stability", "dependencies.python", "lastVerified"}
    assert validate_metadata.main([str(REPO_ROOT / "tests/fixtures/broken_metadata.yaml")]) == 1


def test_generated_readmes_are_current():
    stale = [str(p) for p, content in generate_readme.expected_files().items() if p.read_text() != content]
    assert not stale, f"run `python scripts/generate_readme.py`: stale {stale}"


def test_check_mode_fails_on_a_stale_readme(tmp_path, monkeypatch):
    stale = tmp_path / "README.md"
    stale.write_text(generate_readme.pipelines_readme().replace("phase_02_train_man_train_model", "base_model", 1))
    monkeypatch.setattr(generate_readme, "PIPELINES_README", stale)
    monkeypatch.setattr(generate_readme, "COMPONENTS", {})
    assert generate_readme.main(["--check"]) == 1
    assert generate_readme.main([]) == 0
    assert generate_readme.main(["--check"]) == 0


def test_generated_block_replaces_only_itself():
    readme = "intro\n" + generate_readme.START + "\nold\n" + generate_readme.END + "\n\n## Failure modes\nkept\n"
    updated = generate_readme.with_block(readme, generate_readme.START + "\nnew\n" + generate_readme.END + "\n")
    assert (
        updated == "intro\n" + generate_readme.START + "\nnew\n" + generate_readme.END + "\n\n## Failure modes\nkept\n"
    )


@pytest.mark.parametrize("directory,public_name", sorted(generate_readme.COMPONENTS.items()))
def test_every_component_parameter_is_documented(directory, public_name):
    """Each parameter of a component has a description in its Google docstring (it becomes the README table)."""
    import importlib
    import inspect

    import docstring_parser

    func = getattr(importlib.import_module(directory.replace("/", ".")), public_name).python_func
    documented = {p.arg_name for p in docstring_parser.parse(inspect.getdoc(func)).params}
    undocumented = set(inspect.signature(func).parameters) - documented - {"task_config"}
    assert not undocumented, f"{public_name}: document {sorted(undocumented)} in its docstring"


def test_training_readme_shows_exactly_the_rbac_the_client_needs():
    root = REPO_ROOT / "components/training/finetuning"
    assert (root / "rbac.yaml").read_text() in (root / "README.md").read_text()
