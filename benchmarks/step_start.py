"""What each pipeline step pip-installs when its pod starts, now and with the previous default.

Usage::

    python benchmarks/step_start.py [--now PIPELINE.yaml] [--before-ref e7b6ccb] [--index-url URL] [--details]

For every executor of the compiled pipeline (default: the checked-in ``sft`` pipeline) and of the same pipeline as it
was compiled at ``--before-ref`` (default ``e7b6ccb``: every step on ``python:3.11.11-slim-bookworm`` with everything
pip-installed), it resolves the executor's install list for the cluster's platform (linux x86_64, the image's Python)
with ``pip install --dry-run --ignore-installed --report`` against the public index (``pip --isolated``: no local
wheel directory or mirror that would hand back a CPU-only torch). On a linux x86_64 host with that Python the
resolution is native (sdist-only dependencies such as ``sqlitedict`` resolve as in the pod); elsewhere it uses
``--platform manylinux_*_x86_64 --python-version X --only-binary=:all:``, where an sdist-only dependency fails. It sums
the sizes of what gets downloaded (``Content-Length`` of the resolved files, or their size on disk for ``file://``
URLs). What the image already carries
is not installed by pip in the pod, so for a PyTorch image (``pytorch/pytorch:<torch>-cuda...``) the install list is
resolved together with ``torch==<torch>`` (a conflict would fail here, as it would in the pod) and torch's own
closure is subtracted; packages from the image's conda base (numpy, pyyaml, ...) are not subtracted, so "now" figures
are an upper bound. Sizes are download sizes (compressed wheels), not installed sizes.

Needs network access to the index (minutes: torch's CUDA wheels are resolved from their metadata).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from components._common.images import python_version_of, torch_version_of  # noqa: E402
from tests.harness.executors import HEAVY, ExecutorInstall, executor_installs, requirement_name  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
#: manylinux tags a linux x86_64 node with glibc >= 2.35 (Debian 12, Ubuntu 22.04) accepts.
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(5, 36)] + ["manylinux2014_x86_64", "linux_x86_64"]
CERT = os.environ.get("PIP_CERT", "/etc/ssl/certs/ca-certificates.crt")


def resolve(requirements: list[str], python: str, index_url: str, no_deps: bool = False) -> list[dict]:
    """The ``install`` entries of pip's report for ``requirements`` on linux x86_64 / CPython ``python``."""
    with tempfile.TemporaryDirectory() as workdir:
        report = Path(workdir) / "report.json"
        command = [sys.executable, "-m", "pip", "--isolated", "install", "--dry-run", "--ignore-installed", "--quiet"]
        command += ["--report", str(report), "--target", str(Path(workdir) / "target"), "--index-url", index_url]
        command += ["--cert", CERT] if Path(CERT).is_file() else []
        if not _host_is(python):
            # Cross-resolution: wheels only (pip's rule), so a dependency published as an sdist only fails here.
            command += ["--only-binary=:all:", "--python-version", python]
            command += [arg for platform in PLATFORMS for arg in ("--platform", platform)]
        command += ["--no-deps"] if no_deps else []
        completed = subprocess.run([*command, *requirements], capture_output=True, text=True, timeout=1800)
        if completed.returncode:
            raise RuntimeError(f"pip could not resolve {requirements} for Python {python}: {completed.stderr[-2000:]}")
        return json.loads(report.read_text())["install"]


def _host_is(python: str) -> bool:
    """Whether this machine is the pods' platform (linux x86_64, CPython ``python``): resolve natively then."""
    import platform

    host_python = f"{sys.version_info.major}.{sys.version_info.minor}"
    return sys.platform == "linux" and platform.machine() == "x86_64" and host_python == python


def wheel_size(url: str) -> int:
    """Bytes of a resolved wheel: its size on disk (``file://``) or the index's ``Content-Length``."""
    if url.startswith("file://"):
        return Path(urllib.request.url2pathname(url.removeprefix("file://"))).stat().st_size
    request = urllib.request.Request(url, method="HEAD")
    with urllib.request.urlopen(request, timeout=60) as response:
        return int(response.headers.get("Content-Length") or 0)


def installed_at_start(executor: ExecutorInstall, index_url: str) -> dict[str, tuple[str, int]]:
    """``{distribution: (version, bytes)}`` that ``executor`` pip-installs when its pod starts on its image."""
    python = python_version_of(executor.image)
    torch = torch_version_of(executor.image)
    provided: set[str] = set()
    if torch:
        carried = resolve([f"torch=={torch}"], python, index_url)
        provided = {requirement_name(item["metadata"]["name"]) for item in carried}
    entries = []
    for install in executor.installs:
        requirements = [r for r in install.requirements if _applies(r, python)]
        if not requirements:
            continue
        pinned_torch = [f"torch=={torch}"] if torch and not install.no_deps else []
        entries += resolve(requirements + pinned_torch, python, index_url, no_deps=install.no_deps)
    chosen = {}
    for item in entries:
        name = requirement_name(item["metadata"]["name"])
        if name not in provided:
            chosen[name] = (item["metadata"]["version"], item["download_info"]["url"])
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        sizes = dict(zip(chosen, pool.map(wheel_size, [url for _, url in chosen.values()]), strict=True))
    return {name: (version, sizes[name]) for name, (version, _) in sorted(chosen.items())}


def _applies(requirement: str, python: str) -> bool:
    """Whether a requirement's environment marker holds on CPython ``python`` / linux."""
    from packaging.requirements import Requirement

    marker = Requirement(requirement).marker
    return marker is None or marker.evaluate({"python_version": python, "sys_platform": "linux"})


def _step(executor_name: str) -> str:
    return executor_name.removeprefix("exec-")


def _mb(packages: dict[str, tuple[str, int]]) -> float:
    return sum(size for _, size in packages.values()) / 1e6


def _heavy(packages: dict[str, tuple[str, int]]) -> str:
    names = [name for name in packages if HEAVY.match(name)]
    return f"{len(names)} ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})" if names else "0"


def main() -> None:
    """Resolves every executor now and before and prints one row per step."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--now", type=Path, help="a compiled pipeline (default: sft compiled now, default settings)")
    parser.add_argument("--before-ref", default="e7b6ccb", help="git revision of the previous default")
    parser.add_argument("--before-path", default="pipelines/training/sft/pipeline.yaml")
    parser.add_argument("--index-url", default="https://pypi.org/simple")
    parser.add_argument("--details", action="store_true", help="also list every package with its size")
    args = parser.parse_args()
    revision = f"{args.before_ref}:{args.before_path}"
    before_text = subprocess.run(
        ["git", "show", revision], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout
    if args.now is None:
        from pipelines.compile import compile_named

        args.now = compile_named("sft", Path(tempfile.mkdtemp(prefix="step-start-")) / "sft.yaml")
    now, before = executor_installs(args.now), executor_installs(before_text)
    print(
        "| step | image now | packages now | MB now | torch, nvidia-*, triton now | packages before | MB before "
        "| torch, nvidia-*, triton before |"
    )
    print("|---|---|---|---|---|---|---|---|")
    totals = [0, 0.0, 0, 0.0]
    details = []
    for name in sorted(now):
        current = installed_at_start(now[name], args.index_url)
        previous = installed_at_start(before[name], args.index_url) if name in before else {}
        for index, figure in enumerate((len(current), _mb(current), len(previous), _mb(previous))):
            totals[index] += figure
        print(
            f"| {_step(name)} | `{now[name].image}` | {len(current)} | {_mb(current):,.0f} | {_heavy(current)} "
            f"| {len(previous)} | {_mb(previous):,.0f} | {_heavy(previous)} |",
            flush=True,
        )
        details.append((name, current, previous))
    print(f"| **all steps** | | {totals[0]} | {totals[1]:,.0f} | | {totals[2]} | {totals[3]:,.0f} | |")
    if args.details:
        for name, current, previous in details:
            for when, packages in (("now", current), ("before", previous)):
                listed = ", ".join(f"{n}=={v} ({size / 1e6:.1f} MB)" for n, (v, size) in packages.items())
                print(f"\n{_step(name)} {when}: {listed}")


if __name__ == "__main__":
    main()
