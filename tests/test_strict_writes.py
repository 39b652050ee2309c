"""Every create, patch and replace the project sends to the Kubernetes API asks for ``fieldValidation=Strict``.

The source is scanned for every ``kubernetes.client`` write call, direct or handed to ``Api.call`` (else a server
prunes unknown fields silently); the emulator tests check the wire.
"""

import ast
import inspect
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def _kubernetes_write_methods() -> set[str]:
    import kubernetes.client as client

    names = set()
    for _, api_class in inspect.getmembers(client, inspect.isclass):
        if api_class.__name__.endswith("Api") and api_class.__module__.startswith("kubernetes.client.api"):
            names |= {name for name in dir(api_class) if name.startswith(("create_", "patch_", "replace_"))}
    return {name for name in names if not name.endswith("_with_http_info")}


def _writes_without_strict(path: Path, methods: set[str], text: str | None = None) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8") if text is None else text)
    found = []
    for call in ast.walk(tree):
        if not isinstance(call, ast.Call):
            continue
        referenced = [call.func, *call.args]
        for node in referenced:
            if isinstance(node, ast.Attribute) and node.attr in methods:
                if not any(keyword.arg == "field_validation" for keyword in call.keywords):
                    found.append(f"{path.relative_to(REPO_ROOT)}:{call.lineno} {node.attr}")
    return found


def test_every_kubernetes_write_in_the_source_is_strict():
    methods = _kubernetes_write_methods()
    assert {"create_namespaced_custom_object", "patch_namespaced_custom_object"} <= methods
    sources = [
        path
        for folder in ("components", "pipelines")
        for path in (REPO_ROOT / folder).rglob("*.py")
        if "tests" not in path.relative_to(REPO_ROOT).parts
    ]
    offenders = [line for path in sources for line in _writes_without_strict(path, methods)]
    assert offenders == []
    strict = [path for path in sources if "field_validation=" in path.read_text(encoding="utf-8")]
    assert len(strict) >= 2  # the job client (TrainJob/PyTorchJob create and patch) and doctor's access review


def test_the_scan_finds_a_write_without_strict():
    probe = REPO_ROOT / "components" / "probe.py"
    text = "def f(api):\n    api.call('x', api.custom.create_namespaced_custom_object, 'g', 'v', 'ns', 'p', {})\n"
    assert _writes_without_strict(probe, _kubernetes_write_methods(), text) == [
        "components/probe.py:2 create_namespaced_custom_object"
    ]
    strict = text.replace("{})", "{}, field_validation='Strict')")
    assert _writes_without_strict(probe, _kubernetes_write_methods(), strict) == []
