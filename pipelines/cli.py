"""The ``kfp-finetune`` command line (filled in by the pipelines issue)."""

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``kfp-finetune``."""
    print("kfp-finetune: the CLI is not built yet", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
