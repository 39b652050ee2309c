"""A clone of this repository alone is the whole project: nothing reads outside it, no doc shows a machine path."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Files that run or configure something (Markdown is checked separately for machine paths).
CODE_SUFFIXES = {".py", ".sh", ".toml", ".cfg", ".ini", ".yaml", ".yml", ".json", ".txt", ""}
#: Literal ways out of the repository, or into a developer machine's folders.
OUTSIDE = re.compile(r"\.\./shared\b|/work/(?:main|shared|wt-)|/tmp/h\d+/")
PARENTS = re.compile(r"Path\(__file__\)(?:\.resolve\(\)|\.absolute\(\))?\.parents\[(\d+)\]((?:\.parent)*)")
PARENT_CHAIN = re.compile(r"Path\(__file__\)(?:\.resolve\(\)|\.absolute\(\))?((?:\.parent)+)")
#: Absolute paths of a machine in Markdown (sample output must use ./relative paths).
MACHINE_PATH = re.compile(r"(?<![\w.])(?:/work/[\w.-]+|/tmp/(?:h\d+|tmp\w+|pytest-of-\w+)\b|/root/[\w.-]+|/home/\w+/)")


def repository_files() -> list[Path]:
    """Files git tracks plus new files it does not ignore, relative to the repository root."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO_ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [Path(name) for name in sorted(set(listed.split("\0"))) if name and (REPO_ROOT / name).is_file()]


def outside_reads(text: str, relative: Path) -> list[str]:
    """Each place in ``text`` (the content of ``relative``) that reaches outside the repository, as ``line: why``."""
    found = []
    depth = len(relative.parts) - 1  # Path(__file__).parents[depth] is the repository root
    for number, line in enumerate(text.splitlines(), 1):
        if OUTSIDE.search(line):
            found.append(f"{number}: {OUTSIDE.search(line).group(0)!r}")
        for match in PARENTS.finditer(line):
            climb = int(match.group(1)) + match.group(2).count(".parent")  # as an index of .parents
            if climb > depth:
                found.append(f"{number}: {match.group(0)} is .parents[{climb}] of a file {depth} deep")
        for match in PARENT_CHAIN.finditer(line):
            climb = match.group(1).count(".parent") - 1  # .parent is .parents[0]
            if climb > depth:
                found.append(f"{number}: {match.group(0)} is .parents[{climb}] of a file {depth} deep")
    return found


def test_the_scanner_finds_a_reintroduced_shared_read():
    """The check can fail: the very lines this repository used to have are found."""
    # The probes are assembled so that this file does not itself hold the lines it looks for.
    beside, up = "shared", 2
    assert outside_reads(f'SPEC = Path(__file__).resolve().parents[{up + 1}] / "{beside}"', Path("tests/harness/a.py"))
    assert outside_reads(f'CRDS = Path(__file__).resolve().parents[{up}].parent / "x"', Path("tests/harness/a.py"))
    assert outside_reads(f"GUIDE = REPO_ROOT / '../{beside}/seeds/guide.md'", Path("tests/a.py"))
    assert outside_reads("ROOT = Path(__file__).parent.parent.parent", Path("tests/a.py"))
    assert not outside_reads('ROOT = Path(__file__).resolve().parents[1] / "specs"', Path("tests/harness/a.py"))
    assert not outside_reads("ROOT = Path(__file__).parent.parent", Path("tests/harness/a.py"))


@pytest.mark.parametrize("relative", [p for p in repository_files() if p.suffix in CODE_SUFFIXES], ids=str)
def test_no_file_reads_outside_the_repository(relative):
    if relative == Path(__file__).relative_to(REPO_ROOT):
        return  # this file names the patterns it looks for
    try:
        text = (REPO_ROOT / relative).read_text()
    except UnicodeDecodeError:
        return
    assert not outside_reads(text, relative), (
        f"{relative} reaches outside the repository: {outside_reads(text, relative)}"
    )


def test_docs_show_no_machine_paths():
    offenders = []
    for relative in repository_files():
        if relative.suffix != ".md":
            continue
        for number, line in enumerate((REPO_ROOT / relative).read_text().splitlines(), 1):
            if MACHINE_PATH.search(line):
                offenders.append(f"{relative}:{number}: {MACHINE_PATH.search(line).group(0)}")
    assert not offenders, "machine paths in docs (use ./kfp-finetune-demo/... style): " + "; ".join(offenders)


def test_vendored_specs_match_their_recorded_sources():
    run = subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts/refresh_specs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
