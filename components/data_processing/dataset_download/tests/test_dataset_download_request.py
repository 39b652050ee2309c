"""``run.dataset_download_request``: every ``dataset_download`` argument lands in the request under its name."""

import dataclasses
import inspect

import pytest

from components.data_processing.dataset_download import dataset_download
from components.data_processing.dataset_download.run import OUTPUTS, dataset_download_request

PARAMETERS = inspect.signature(dataset_download.python_func).parameters


def test_every_argument_lands_under_its_own_name():
    arguments = {name: object() for name in PARAMETERS}
    request = dataset_download_request(arguments)
    landed = {field.name: getattr(request, field.name) for field in dataclasses.fields(request)}
    assert set(landed) == set(PARAMETERS) - set(OUTPUTS)
    assert all(landed[name] is arguments[name] for name in landed)
    assert {name for name, p in PARAMETERS.items() if "Output" in str(p.annotation)} == set(OUTPUTS)


def test_an_unknown_argument_is_one_line_naming_it():
    with pytest.raises(TypeError, match=r"^dataset_download: arguments \['sead'\] have no field") as raised:
        dataset_download_request({**dict.fromkeys(PARAMETERS), "sead": 1})
    assert "\n" not in str(raised.value)
