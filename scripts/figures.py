"""One source for every figure the documents state (issue 48): ``docs/figures.json``, written by what measures it.

A figure is a number (or a small generated table) the README, ``docs/`` or a component README states: a demo result,
a size, a timing, a line count. Each has one entry in ``docs/figures.json``::

    "demo.lora.heldout_loss.trained": {"value": 2.396, "unit": "nats per token", "text": "2.396",
        "source": "benchmarks/demo_figures.py", "measured": "2026-12-06", "commit": "26f55cd"}

written by its producing script (``record``, called by each script's ``--write-figures``), and each place a document
states it is marked, invisibly on GitHub::

    held-out loss <!-- fig:demo.lora.heldout_loss.trained -->2.396<!-- /fig --> nats

``<!-- fig:NAME fmt=SPEC -->`` renders ``format(value, SPEC)`` instead of the entry's ``text`` (``fmt=.2f``), and
``fmt=measured`` the date it was measured; a marker whose text starts on a new line is a block (a generated table or
transcript, fences included), its text the entry's ``text`` verbatim.

``python scripts/figures.py --check`` fails (exit 1, one line per disagreement) when a document and ``figures.json``
disagree or a marker names no figure, and when a cheap figure (:func:`cheap_producers`: line counts, Workflow sizes,
container spec sizes, the wheel, pipeline parameter counts) measures otherwise now; ``--write`` re-measures the cheap
figures, records them and re-renders every document from ``figures.json``. Scripts that measure record their figures
with :func:`record` (``--write-figures``), shell scripts with ``--record SOURCE NAME=VALUE[:UNIT] ...``.
``tests/test_figures.py`` runs the checks.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
FIGURES_FILE = REPO_ROOT / "docs" / "figures.json"
#: The documents whose figures are marked (globs, relative to the repository root).
DOCUMENT_GLOBS = ("README.md", "docs/*.md", "components/*/*/README.md", "pipelines/**/README.md")
MARKER = re.compile(r"<!-- fig:(?P<name>[A-Za-z0-9_.\-]+)(?: fmt=(?P<fmt>[^ ]+))? -->(?P<text>.*?)<!-- /fig -->", re.S)


def figure(value: Any, unit: str, text: str | None = None, **extra: Any) -> dict[str, Any]:
    """One entry before :func:`record` stamps it: ``value``, ``unit`` and how documents show it (default ``str``)."""
    return {"value": value, "unit": unit, "text": str(value) if text is None else text, **extra}


def load(path: Path = FIGURES_FILE) -> dict[str, dict[str, Any]]:
    """The figures, by name (empty when the file does not exist yet)."""
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def save(figures: dict[str, dict[str, Any]], path: Path = FIGURES_FILE) -> None:
    """Writes the figures sorted by name, one stable layout (reviewable diffs)."""
    path.write_text(json.dumps(dict(sorted(figures.items())), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def commit() -> str:
    """The short commit measured (``+dirty`` when the working tree has changes), or ``unknown`` outside git."""
    done = subprocess.run(
        ["git", "describe", "--always", "--dirty=+dirty", "--abbrev=7"], cwd=REPO_ROOT, capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def record(entries: dict[str, dict[str, Any]], source: str, path: Path = FIGURES_FILE) -> None:
    """Stores ``entries`` (from :func:`figure`) in ``figures.json``, stamped with ``source``, today and the commit.

    Entries whose value and text are unchanged keep their former stamp, so re-running a script on an unchanged tree
    changes nothing; an entry transcribed from the documents (with a ``note``) is re-stamped once measured.
    """
    figures = load(path)
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    stamp = {"source": source, "measured": today, "commit": commit()}
    for name, entry in entries.items():
        old = figures.get(name, {})
        unchanged = old.get("value") == entry["value"] and old.get("text") == entry["text"]
        if unchanged and old.get("source") == source and "note" not in old:  # a transcribed one is re-stamped
            continue
        figures[name] = {**entry, **stamp}
    save(figures, path)


def documents(root: Path = REPO_ROOT) -> list[Path]:
    """The marked documents' paths, sorted."""
    return sorted({path for pattern in DOCUMENT_GLOBS for path in root.glob(pattern) if path.is_file()})


def markers(text: str) -> Iterator[re.Match[str]]:
    """Every figure marker in ``text``."""
    return MARKER.finditer(text)


def rendered(entry: dict[str, Any], fmt: str | None, block: bool) -> str:
    """What a marker of ``entry`` shows: its ``text``, its value by ``fmt`` or its date; a block on lines of its own."""
    if fmt == "measured":
        shown = str(entry.get("measured"))
    else:
        shown = format(entry["value"], fmt) if fmt else str(entry["text"])
    return f"\n{shown}\n" if block else shown


def render(text: str, figures: dict[str, dict[str, Any]]) -> str:
    """``text`` with every marker's content replaced by its figure (unknown names are left as they are)."""

    def replace(match: re.Match[str]) -> str:
        entry = figures.get(match["name"])
        if entry is None:
            return match[0]
        content = rendered(entry, match["fmt"], match["text"].startswith("\n"))
        return match[0].replace(f"-->{match['text']}<!--", f"-->{content}<!--", 1)

    return MARKER.sub(replace, text)


def stated(root: Path = REPO_ROOT) -> set[str]:
    """The names of the figures some document marks."""
    return {match["name"] for path in documents(root) for match in markers(path.read_text(encoding="utf-8"))}


def disagreements(figures: dict[str, dict[str, Any]], root: Path = REPO_ROOT) -> list[str]:
    """One line per marker that names no figure or shows another text than ``figures``."""
    problems = []
    for path in documents(root):
        text = path.read_text(encoding="utf-8")
        for match in markers(text):
            where = f"{path.relative_to(root)}:{text.count(chr(10), 0, match.start()) + 1}"
            name = match["name"]
            if name not in figures:
                problems.append(f"{where}: figure {name!r} is not in docs/figures.json (add it with its script)")
                continue
            expected = rendered(figures[name], match["fmt"], match["text"].startswith("\n"))
            if match["text"] != expected:
                problems.append(
                    f"{where}: {name} says {match['text'].strip()!r}, docs/figures.json says {expected.strip()!r} "
                    f"(measured {figures[name].get('measured')} by {figures[name].get('source')}): "
                    "run `python scripts/figures.py --write`"
                )
    return problems


#: The producer of the wheel's size, which depends on the README it renders into.
PACKAGE_SOURCE = "scripts/package_figures.py"


def cheap_producers() -> dict[str, Callable[[], dict[str, dict[str, Any]]]]:
    """``{source script: function returning its figures}``: those cheap and deterministic enough for every check."""
    sys.path.insert(0, str(REPO_ROOT))
    from benchmarks import component_delivery, house_figures, workflow_size
    from scripts import package_figures

    return {
        "benchmarks/house_figures.py": house_figures.figures,
        "benchmarks/workflow_size.py": workflow_size.figures,
        "benchmarks/component_delivery.py": component_delivery.spec_figures,
        PACKAGE_SOURCE: package_figures.figures,
    }


def measure_cheap() -> dict[str, dict[str, dict[str, Any]]]:
    """``{source: {name: entry}}``: the cheap figures measured now."""
    return {source: produce() for source, produce in cheap_producers().items()}


def stale_cheap(figures: dict[str, dict[str, Any]], measured: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """One line per cheap figure whose recorded value differs from the one measured now."""
    problems = []
    for source, entries in measured.items():
        for name, entry in entries.items():
            recorded = figures.get(name, {})
            if recorded.get("value") != entry["value"] or recorded.get("text") != entry["text"]:
                problems.append(
                    f"docs/figures.json: {name} is {recorded.get('text')!r}, {source} measures {entry['text']!r} now: "
                    "run `python scripts/figures.py --write`"
                )
    return problems


def write_documents(figures: dict[str, dict[str, Any]], root: Path = REPO_ROOT) -> list[Path]:
    """Re-renders every marked document from ``figures``; returns those that changed."""
    changed = []
    for path in documents(root):
        text = path.read_text(encoding="utf-8")
        new = render(text, figures)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def parse_assignment(assignment: str) -> tuple[str, dict[str, Any]]:
    """``NAME=VALUE[:UNIT]`` (``--record``) as a name and an entry; VALUE is a number when it reads as one."""
    name, _, rest = assignment.partition("=")
    text, _, unit = rest.partition(":")
    if not name or not text:
        raise SystemExit(f"--record {assignment!r}: expected NAME=VALUE[:UNIT], e.g. setup.demo.seconds=236:s")
    try:
        value: Any = int(text.replace(",", ""))
    except ValueError:
        try:
            value = float(text.replace(",", ""))
        except ValueError:
            value = text
    return name, figure(value, unit, text)


def main(argv: list[str] | None = None) -> int:
    """``--check``, ``--write`` or ``--record``; exit 1 when documents and figures disagree."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="documents vs docs/figures.json (exit 1 on a difference)")
    mode.add_argument("--write", action="store_true", help="re-measure the cheap figures, then re-render the documents")
    mode.add_argument("--record", metavar="SOURCE", help="record NAME=VALUE[:UNIT] figures measured by SOURCE")
    parser.add_argument("assignments", nargs="*", help="with --record: NAME=VALUE[:UNIT]")
    parser.add_argument("--no-measure", action="store_true", help="skip the cheap figures (render / check only)")
    args = parser.parse_args(argv)
    if args.record:
        record(dict(map(parse_assignment, args.assignments)), args.record)
        return 0
    if args.write:
        if not args.no_measure:
            for source, entries in measure_cheap().items():
                record(entries, source)
        changed = write_documents(load())
        if REPO_ROOT / "README.md" in changed and not args.no_measure:  # the wheel carries the README: once more
            record(cheap_producers()[PACKAGE_SOURCE](), PACKAGE_SOURCE)
            changed += write_documents(load())
        print(*(f"rewrote {path.relative_to(REPO_ROOT)}" for path in sorted(set(changed))), sep="\n")
    problems = disagreements(load())
    if args.check and not args.no_measure:
        problems += stale_cheap(load(), measure_cheap())
    print(*problems, sep="\n")
    unstated = sorted(set(load()) - stated())
    print(
        f"figures: {len(load())} in docs/figures.json ({len(unstated)} stated in no document), "
        f"{len(problems)} disagreement(s)"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
