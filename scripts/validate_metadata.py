"""Validates every ``metadata.yaml`` of the components and pipelines against the project's schema.

Usage: ``python scripts/validate_metadata.py [FILE ...]`` (default: every ``components/**/metadata.yaml`` and
``pipelines/**/metadata.yaml``). Prints one line per problem, naming the file and the field; exit code 1 on any.
"""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

import jsonschema
import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]

_VERSIONED = {
    "type": "object",
    "required": ["name", "version"],
    "additionalProperties": False,
    "properties": {"name": {"type": "string", "minLength": 1}, "version": {"type": "string", "minLength": 1}},
}

#: The schema of a ``metadata.yaml`` (component-hub conventions).
METADATA_SCHEMA = {
    "type": "object",
    "required": ["name", "description", "stability", "dependencies", "tags", "lastVerified"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "pattern": "^[a-z][a-z0-9_-]*$"},
        "description": {"type": "string", "minLength": 20},
        "stability": {"enum": ["alpha", "beta", "stable"]},
        "dependencies": {
            "type": "object",
            "additionalProperties": False,
            "required": ["python"],
            "properties": {
                "python": {"type": "array", "items": _VERSIONED, "minItems": 1},
                "services": {"type": "array", "items": _VERSIONED},
            },
        },
        "tags": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
        "lastVerified": {"type": "string", "format": "date"},
        "links": {"type": "object", "additionalProperties": {"type": "string"}},
    },
}


def metadata_files() -> list[Path]:
    """Every metadata.yaml of a component or pipeline (test fixtures excluded)."""
    files = [*REPO_ROOT.glob("components/**/metadata.yaml"), *REPO_ROOT.glob("pipelines/**/metadata.yaml")]
    return sorted(path for path in files if "tests" not in path.relative_to(REPO_ROOT).parts)


def problems_in(path: Path) -> list[str]:
    """Describes every way ``path`` breaks the schema (empty when valid)."""
    try:
        document = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, ValueError) as error:
        return [f"{path}: not valid YAML: {error}"]
    if isinstance(document, dict) and isinstance(document.get("lastVerified"), datetime.date):
        document["lastVerified"] = document["lastVerified"].isoformat()
    validator = jsonschema.Draft202012Validator(METADATA_SCHEMA, format_checker=jsonschema.FormatChecker())
    problems = []
    for error in sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(part) for part in error.absolute_path) or "(top level)"
        problems.append(f"{path}: {where}: {error.message}")
    return problems


def main(paths: list[str]) -> int:
    """Validates ``paths`` (default: all) and prints the problems."""
    files = [Path(p) for p in paths] or metadata_files()
    if not files:
        print("no metadata.yaml found", file=sys.stderr)
        return 1
    problems = [problem for path in files for problem in problems_in(path)]
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"{len(files)} metadata file(s) checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
