"""``request.dataset_download_request``: every ``dataset_download`` argument lands in its group under its own name."""

import dataclasses
import inspect

import pytest

from components.data_processing.dataset_download import dataset_download
from components.data_processing.dataset_download.request import GROUPS, OUTPUTS, dataset_download_request
from tests.harness.requests import component_defaults

PARAMETERS = inspect.signature(dataset_download.python_func).parameters
ARGUMENTS = {**component_defaults(dataset_download), **dict.fromkeys(OUTPUTS), "dataset_uri": "org/name"}


def test_every_argument_lands_in_one_group_under_its_own_name():
    request = dataset_download_request(ARGUMENTS)
    landed = {"pvc_path": request.pvc_path}
    for name in GROUPS:
        landed |= dataclasses.asdict(getattr(request, name))
    assert landed == {name: ARGUMENTS[name] for name in PARAMETERS if name not in OUTPUTS}
    assert {name for name, p in PARAMETERS.items() if "Output" in str(p.annotation)} == set(OUTPUTS)


def test_an_unknown_argument_is_one_line_naming_it():
    with pytest.raises(TypeError, match=r"^dataset_download: arguments \['sead'\] have no field") as raised:
        dataset_download_request({**ARGUMENTS, "sead": 1})
    assert "\n" not in str(raised.value)
