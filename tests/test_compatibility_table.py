"""The README's compatibility table holds: each row's API columns are what the vendored CRDs serve, read the way the
training step reads them (OpenAPI v3 discovery of the emulator's generation), and the runtime images' Training Hub
versions are the ones doctor names.
"""

import re
from pathlib import Path

import yaml

from components.training.finetuning.manifests.api_generations import served_trainjob_api
from pipelines.doctor.training import KNOWN_IMAGES, runtime_image
from tests.harness.kube_schema import CRDS, ODH_3_3, UPSTREAM_2_3, openapi_v3_document

README = Path(__file__).resolve().parents[1] / "README.md"
#: The rows backed by a vendored CRD, and the generation the emulator serves for them.
VENDORED_ROWS = {
    "RHOAI 3.3": ODH_3_3,
    "RHOAI 3.5": ODH_3_3,
    "RHOAI 3.6": UPSTREAM_2_3,
    "Kubeflow Trainer 2.3": UPSTREAM_2_3,
}


def _table() -> dict[str, dict[str, str]]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Compatibility") :]
    lines = [line for line in section.splitlines()[1:] if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0]] = dict(zip(header, cells))
    return rows


def test_the_api_columns_are_what_each_vendored_generation_serves():
    rows = _table()
    assert set(VENDORED_ROWS) <= set(rows)
    for platform, generation in VENDORED_ROWS.items():
        served = served_trainjob_api(openapi_v3_document(generation))
        row = rows[platform]
        assert row["TrainJob API (pod settings in)"] == f"`{served.generation}`", platform
        assert row["status (`status.trainerStatus`)"].startswith("served" if served.trainer_status else "not served")
        timeout = row["training timeout"]
        assert ("activeDeadlineSeconds` +" in timeout) is served.active_deadline, platform


def test_the_runtime_images_training_hub_versions_match_doctor_and_the_algorithms_column():
    rows = _table()
    for platform, release in (("RHOAI 3.3", "odh-3.3"), ("RHOAI 3.5", "odh-3.5.0")):
        image = runtime_image(yaml.safe_load((CRDS / release / "training_hub.yaml").read_text()))
        known_release, hub = KNOWN_IMAGES[image]
        assert known_release == platform
        algorithms = rows[platform]["algorithms by the runtime's Training Hub"]
        assert f"Training Hub {hub}" in algorithms
        listed = set(re.findall(r"\b(sft|osft|lora_sft)\b", algorithms))
        # lora_sft arrived in Training Hub 0.6.0
        assert listed == ({"sft", "osft", "lora_sft"} if hub >= "0.6.0" else {"sft", "osft"}), (platform, listed)
