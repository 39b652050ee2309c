"""Which model lm-eval loads: full checkpoints, PEFT adapters on their base, Hub ids, and the clear errors."""

import json
import re
import shutil
from pathlib import Path

import pytest

from components.evaluation.lm_eval import lm_eval
from components.evaluation.lm_eval.model_spec import ModelSourceError, check_model_args
from components.evaluation.lm_eval.model_spec import resolve_model as _resolve_model
from tests.harness.requests import component_defaults


def resolve_model(model_path, model_metadata, **arguments):
    """``resolve_model`` with no ``model_source`` and ``lm_eval``'s ``backend``, unless ``arguments`` say otherwise."""
    values = {"model_source": "", "backend": component_defaults(lm_eval)["backend"], **arguments}
    return _resolve_model(model_path, model_metadata, **values)


def _copy_without(source: Path, target: Path, *names: str) -> Path:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(*names))
    return target


def _adapter_dir(path: Path, base: str, rank: int = 8, with_weights: bool = True, tokenizer_from: Path | None = None):
    path.mkdir(parents=True)
    (path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": base, "r": rank}))
    if with_weights:
        (path / "adapter_model.safetensors").write_bytes(b"\0")
    if tokenizer_from is not None:
        shutil.copy(tokenizer_from / "tokenizer.json", path / "tokenizer.json")
    return path


def test_full_model_directory(tiny_model_dir):
    spec = resolve_model(str(tiny_model_dir), {}, model_args={"dtype": "float32"})
    assert spec.lm_eval_model == "hf"
    assert spec.model_args == {"pretrained": str(tiny_model_dir), "dtype": "float32"}
    assert spec.tokenizer_source == str(tiny_model_dir)
    assert not spec.is_adapter


@pytest.mark.parametrize(
    ("removed", "message"),
    [
        ("model.safetensors", "missing weights"),
        ("tokenizer.json", "missing tokenizer"),
        ("config.json", "missing config.json"),
    ],
)
def test_model_directory_without_weights_or_tokenizer(tiny_model_dir, tmp_path, removed, message):
    broken = _copy_without(tiny_model_dir, tmp_path / "broken", removed)
    with pytest.raises(ModelSourceError, match=f"^model: {re.escape(str(broken))} is not a model .*{message}"):
        resolve_model(str(broken), {})


def test_missing_directory_and_hub_ids(tmp_path):
    with pytest.raises(ModelSourceError, match="model_source: .* does not exist"):
        resolve_model("", {}, model_source=str(tmp_path / "nowhere"))
    spec = resolve_model("", {}, model_source="Qwen/Qwen2.5-0.5B-Instruct")
    assert spec.model_args == {"pretrained": "Qwen/Qwen2.5-0.5B-Instruct"}
    assert spec.source == "Qwen/Qwen2.5-0.5B-Instruct"


def test_model_source_overrides_the_model_artifact(tiny_model_dir, tmp_path):
    spec = resolve_model(str(tmp_path / "not-used"), {}, model_source=str(tiny_model_dir))
    assert spec.model_args["pretrained"] == str(tiny_model_dir)


def test_adapter_loads_on_the_base_named_in_its_config(tiny_model_dir, tmp_path):
    adapter = _adapter_dir(tmp_path / "adapter", str(tiny_model_dir))
    spec = resolve_model(str(adapter), {"base_model": "ignored/because-config-base-exists"})
    base = str(tiny_model_dir)
    assert spec.model_args == {"pretrained": base, "peft": str(adapter), "tokenizer": base}
    assert spec.is_adapter and spec.base_model == str(tiny_model_dir)


def test_adapter_falls_back_to_the_metadata_base_and_its_own_tokenizer(tiny_model_dir, tmp_path):
    adapter = _adapter_dir(tmp_path / "adapter", "/training-pod/only/base", tokenizer_from=tiny_model_dir)
    spec = resolve_model(str(adapter), {"base_model": str(tiny_model_dir)})
    assert spec.base_model == str(tiny_model_dir)
    assert spec.tokenizer_source == str(adapter)
    hub = resolve_model(str(adapter), {"base_model": "org/base-model"})
    assert hub.model_args["pretrained"] == "org/base-model"


def test_adapter_errors(tiny_model_dir, tmp_path):
    lost = _adapter_dir(tmp_path / "lost", "/training-pod/only/base")
    with pytest.raises(ModelSourceError, match="base model cannot be located") as error:
        resolve_model(str(lost), {})
    assert "/training-pod/only/base" in str(error.value) and "base_model" in str(error.value)
    no_weights = _adapter_dir(tmp_path / "no-weights", str(tiny_model_dir), with_weights=False)
    with pytest.raises(ModelSourceError, match="no adapter weights"):
        resolve_model(str(no_weights), {})
    bare_base = _copy_without(tiny_model_dir, tmp_path / "bare-base", "tokenizer*")
    no_tokenizer = _adapter_dir(tmp_path / "no-tokenizer", str(bare_base))
    with pytest.raises(ModelSourceError, match="no tokenizer in the adapter"):
        resolve_model(str(no_tokenizer), {})


def test_vllm_backend_loads_adapters_as_lora(tiny_model_dir, tmp_path):
    adapter = _adapter_dir(tmp_path / "adapter", str(tiny_model_dir), rank=32)
    spec = resolve_model(str(adapter), {}, backend="vllm")
    assert spec.lm_eval_model == "vllm"
    assert spec.model_args == {
        "pretrained": str(tiny_model_dir),
        "tokenizer": str(tiny_model_dir),
        "lora_local_path": str(adapter),
        "max_lora_rank": 32,
    }


@pytest.mark.parametrize(
    ("model_args", "message"),
    [
        ({"pretrained": "x"}, r"model_args\['pretrained'\] is set by the component"),
        ({"peft": "x"}, r"model_args\['peft'\] is set by the component"),
        ({"token": "hf_abc"}, "HF_TOKEN environment variable"),
        ("dtype=float16", "model_args must be a dict"),
    ],
)
def test_model_args_that_the_component_owns_or_that_carry_secrets(model_args, message):
    with pytest.raises(ValueError, match=message) as error:
        check_model_args(model_args)
    assert "hf_abc" not in str(error.value)
