"""What the API server stored against what this step sent: a job that lost a pod setting is never followed.

A server that ignores ``fieldValidation=Strict`` prunes unknown fields silently, and a mutating admission webhook may
drop a volume or a toleration: either way the stored job would run without the pod settings the step wrote (its
workspace volume, say). After a create and an adoption the launcher compares the two (:func:`lost_fields`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: Fields the cluster changes by design (Kueue and the launcher suspend and resume a job).
CHANGED_BY_DESIGN = frozenset({"spec.suspend"})
#: How many lost fields a message names.
_NAMED = 5


def _contains(stored: Any, sent: Any) -> bool:
    """Whether ``stored`` holds everything of ``sent`` (dicts: each key, lists: each item in some item, else equal)."""
    if isinstance(sent, Mapping):
        return isinstance(stored, Mapping) and all(k in stored and _contains(stored[k], v) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(stored, list) and all(any(_contains(s, item) for s in stored) for item in sent)
    return stored == sent


def _item_name(item: Any, index: int) -> str:
    return f"[name={item['name']}]" if isinstance(item, Mapping) and isinstance(item.get("name"), str) else f"[{index}]"


def _walk(sent: Any, stored: Any, path: str, lost: list[str]) -> None:
    if path in CHANGED_BY_DESIGN or _contains(stored, sent):
        return
    if isinstance(sent, Mapping) and isinstance(stored, Mapping):
        for key, value in sent.items():
            where = f"{path}.{key}" if path else key
            if key not in stored:
                if where not in CHANGED_BY_DESIGN:
                    lost.append(where)
            else:
                _walk(value, stored[key], where, lost)
        return
    if isinstance(sent, list) and isinstance(stored, list):
        for index, item in enumerate(sent):
            if any(_contains(candidate, item) for candidate in stored):
                continue
            name = item.get("name") if isinstance(item, Mapping) else None
            same = [s for s in stored if isinstance(s, Mapping) and name is not None and s.get("name") == name]
            if not same and name is None and len(stored) == len(sent):
                same = [stored[index]]  # (unnamed items of a list of the same length: compared in order)
            if same:
                _walk(item, same[0], f"{path}{_item_name(item, index)}", lost)
            else:
                lost.append(f"{path}{_item_name(item, index)}")
        return
    lost.append(path)


def lost_fields(sent: Mapping[str, Any], stored: Mapping[str, Any]) -> list[str]:
    """The fields of ``sent``'s ``spec`` and labels that ``stored`` lacks or holds changed (dotted paths, in order).

    What the server adds (defaults, status, more list items) is fine; what it removed or changed is returned.
    """
    lost: list[str] = []
    _walk(sent.get("spec") or {}, stored.get("spec"), "spec", lost)
    labels = (sent.get("metadata") or {}).get("labels") or {}
    _walk(labels, (stored.get("metadata") or {}).get("labels"), "metadata.labels", lost)
    return lost


def lost_fields_message(kind: str, where: str, lost: list[str], adopted: bool) -> str:
    """One line: which job lost which fields, why that happens, that it is not followed, what to check."""
    named = ", ".join(lost[:_NAMED]) + (f" and {len(lost) - _NAMED} more" if len(lost) > _NAMED else "")
    how = "the existing job this step would re-attach to lacks" if adopted else "the API server stored it without"
    return (
        f"{kind} {where}: {how} field(s) {named} that this step sends (an API server that ignores "
        "fieldValidation=Strict prunes fields it does not serve, and a mutating admission webhook may remove pod "
        "settings such as the workspace volume): a job without them would not train as asked, so it is not "
        "followed. Check `kubectl get mutatingwebhookconfigurations` and the served API (`kfp-finetune doctor`)"
    )
