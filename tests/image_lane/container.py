"""A buildah working container of the step image: one ``buildah from``, then commands run in it, then removed.

``buildah run --isolation chroot`` is what runs a command in an image on machines where ``podman run`` cannot (crun
cannot set rlimits there); chroot isolation shares the host's network, so the step reaches the test servers on
127.0.0.1. Folders are bind-mounted at the same path, so the paths in KFP's executor input hold inside and outside.
"""

from __future__ import annotations

import dataclasses
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

STORAGE = ("--storage-driver", "vfs")
#: A Python exception line (``ModuleNotFoundError: No module named 'x'``, ``pkg.mod.SomeError: ...``).
_PYTHON_ERROR = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b: ")


@dataclasses.dataclass(frozen=True)
class Finished:
    """A command's end: its exit status and its output (stdout and stderr together)."""

    returncode: int
    output: str

    def last_error(self) -> str:
        """The last line that names an error (``ModuleNotFoundError: No module named 'x'``), else the last line."""
        lines = [line.strip() for line in self.output.splitlines() if line.strip()]
        errors = [line for line in lines if _PYTHON_ERROR.match(line)]  # the exception that ended the step
        return (errors or lines or ["(no output)"])[-1]


class WorkingContainer:
    """A working container made from ``image`` (``buildah from``); use as a context manager to remove it after."""

    def __init__(self, image: str, name: str) -> None:
        self.image, self.name = image, name

    def __enter__(self) -> WorkingContainer:
        subprocess.run(["buildah", *STORAGE, "rm", self.name], capture_output=True, check=False, timeout=900)
        subprocess.run(
            ["buildah", *STORAGE, "from", "--pull-never", "--name", self.name, self.image],
            capture_output=True,
            check=True,
            timeout=600,
        )
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["buildah", *STORAGE, "rm", self.name], capture_output=True, check=False, timeout=900)

    def run(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        mounts: Sequence[Path] = (),
        user: str = "",
        timeout: float = 600,
        log: Path | None = None,
    ) -> Finished:
        """Runs ``command`` in the container (as the image's user unless ``user``); never raises for its failure."""
        options = ["--isolation", "chroot"]
        for key, value in (env or {}).items():
            options += ["--env", f"{key}={value}"]
        for mount in mounts:
            options += ["--volume", f"{mount}:{mount}:rw"]
        if user:
            options += ["--user", user]
        try:
            done = subprocess.run(
                ["buildah", *STORAGE, "run", *options, self.name, "--", *command],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            finished = Finished(done.returncode, done.stdout + done.stderr)
        except subprocess.TimeoutExpired as error:
            output = (error.stdout or b"").decode(errors="replace") + (error.stderr or b"").decode(errors="replace")
            finished = Finished(124, output + f"\nerror: timed out after {timeout:.0f} s")
        if log is not None:
            log.write_text(finished.output)
        return finished
