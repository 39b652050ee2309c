"""Which files of a Hugging Face Hub dataset repository hold a given subset (config) and split.

Follows the Hub's conventions: the ``configs`` list of the dataset card's YAML header when there is one
(``config_name``, ``data_files`` as a glob, a list of globs, or a list of ``{split, path}``), else the file layout:
``<subset>/`` holds a subset, and a file belongs to split ``S`` when a directory of its path is named ``S`` or its
name starts with ``S`` followed by ``-``, ``_``, ``.`` or a digit. Files that name no split are the ``train`` split.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from pathlib import PurePosixPath

from .locations import DatasetSourceError
from .readers import data_format

#: Split names recognised in file layouts (``valid``/``dev`` are kept as they are, not renamed).
KNOWN_SPLITS = ("train", "test", "validation", "valid", "dev", "eval")


def card_configs(readme: str) -> list[dict]:
    """The ``configs`` list of a dataset card's YAML header (``---`` ... ``---``), or ``[]``."""
    import yaml

    match = re.match(r"^---\s*\n(.*?)\n---\s*(\n|$)", readme, re.DOTALL)
    if not match:
        return []
    header = yaml.safe_load(match.group(1)) or {}
    configs = header.get("configs") if isinstance(header, dict) else None
    return [config for config in configs or [] if isinstance(config, dict)]


def _split_of(path: str) -> str | None:
    parts = path.split("/")
    for split in KNOWN_SPLITS:
        if split in parts[:-1] or re.match(rf"^{split}([-_.0-9]|$)", parts[-1]):
            return split
    return None


def _glob(paths: Sequence[str], patterns: str | Sequence[str]) -> list[str]:
    patterns = [patterns] if isinstance(patterns, str) else list(patterns)
    return sorted(path for path in paths if any(fnmatch.fnmatch(path, pattern) for pattern in patterns))


def _files_from_config(paths: Sequence[str], config: dict, split: str, where: str) -> list[str]:
    data_files = config.get("data_files") or []
    if isinstance(data_files, str) or all(isinstance(item, str) for item in data_files):
        by_split = {"train": data_files}
    else:
        by_split = {item.get("split", "train"): item.get("path", []) for item in data_files if isinstance(item, dict)}
    if split not in by_split:
        raise DatasetSourceError(f"{where}: no split {split!r} (hf_split); available: {', '.join(sorted(by_split))}")
    return _glob(paths, by_split[split])


def _pick_config(configs: list[dict], subset: str, where: str) -> dict:
    names = [str(config.get("config_name", "default")) for config in configs]
    if subset:
        if subset not in names:
            raise DatasetSourceError(f"{where}: no subset {subset!r}; available: {', '.join(names)}")
        return configs[names.index(subset)]
    defaults = [config for config, name in zip(configs, names) if config.get("default") or name == "default"]
    if defaults or len(configs) == 1:
        return (defaults or configs)[0]
    raise DatasetSourceError(f"{where}: several subsets ({', '.join(names)}); name one as org/name:subset")


def select_hf_files(paths: Sequence[str], subset: str, split: str, configs: Sequence[dict], where: str) -> list[str]:
    """The supported data files among a repository's ``paths`` holding ``subset`` (``""``: the default)/``split``.

    ``configs`` are the dataset card's (:func:`card_configs`), possibly empty; ``where`` is the URI, for messages.

    Raises:
        DatasetSourceError: The subset or split does not exist, or holds no supported data file.
    """
    data_paths = [path for path in paths if data_format(PurePosixPath(path))]
    if configs:
        selected = _files_from_config(data_paths, _pick_config(list(configs), subset, where), split, where)
    else:
        if subset:
            data_paths = [path for path in data_paths if path.startswith(f"{subset}/")]
            if not data_paths:
                raise DatasetSourceError(f"{where}: no data files under subset directory {subset + '/'!r}")
        splits = {path: _split_of(path) for path in data_paths}
        named = {name for name in splits.values() if name}
        if named:
            selected = [path for path, name in splits.items() if name == split]
            if not selected:
                available = ", ".join(sorted(named))
                raise DatasetSourceError(f"{where}: no split {split!r} (hf_split); available: {available}")
        elif split == "train":
            selected = data_paths
        else:
            raise DatasetSourceError(f"{where}: the files name no split, so only hf_split='train' exists: {split!r}")
    if not selected:
        raise DatasetSourceError(f"{where}: no .jsonl/.json/.parquet/.csv(.gz) files for split {split!r}")
    return sorted(selected)
