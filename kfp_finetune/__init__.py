"""kfp-finetune: Kubeflow Pipelines components and pipelines for fine-tuning LLMs.

Where the code is imported from depends on how you have it:

* **From a clone** (the RHOAI guide's way, and ``bash scripts/setup.sh``): the repository's top-level packages
  ``components`` and ``pipelines``, as the guide imports them.
* **From the installed wheel** (``pip install kfp-finetune``): the same packages under this one
  (``kfp_finetune.components``, ``kfp_finetune.pipelines``), so that they cannot clash with a project's own
  ``components/`` or ``pipelines/``. The wheel build (``setup.py``) places them here and rewrites their absolute
  imports and module paths, as pip vendors its dependencies. (This docstring avoids a dotted example of the clone's
  imports: the wheel build would rewrite it too.)

This file is the one module both layouts share: it holds the ``kfp-finetune`` console script's entry point.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    """The ``kfp-finetune`` command (``pipelines.cli.main``, under ``kfp_finetune.`` in the wheel)."""
    from pipelines.cli import main as cli_main

    return cli_main(argv)
