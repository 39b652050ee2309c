"""The fault-injecting TCP proxy (``tests/harness/tcp_proxy.py``) does what each mode says, switchable on the fly."""

import http.client
import json
import time
import urllib.error
import urllib.request

import pytest

from tests.harness.tcp_proxy import tcp_proxy

HEALTH = "/apis/v2beta1/healthz"


def _upstream(stub):
    host, port = stub.url.split("//", 1)[1].rsplit(":", 1)
    return host, int(port)


def _get(url, timeout=2.0):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.status, json.loads(response.read())


def test_forward_then_blackhole_then_refuse_then_forward_again(kfp_api_stub):
    with tcp_proxy(_upstream(kfp_api_stub)) as proxy:
        assert _get(proxy.url + HEALTH) == (200, {"multi_user": False})
        proxy.set_mode("blackhole")
        began = time.monotonic()
        with pytest.raises(TimeoutError):
            _get(proxy.url + HEALTH, timeout=0.3)
        assert 0.3 <= time.monotonic() - began < 2
        proxy.set_mode("refuse")
        with pytest.raises(urllib.error.URLError) as refused:
            _get(proxy.url + HEALTH)
        assert isinstance(refused.value.reason, ConnectionRefusedError)
        port = proxy.port
        proxy.set_mode("forward")
        assert proxy.port == port and _get(proxy.url + HEALTH)[0] == 200
    assert [r.path for r in kfp_api_stub.requests] == [HEALTH, HEALTH]  # the failed ones never reached it


@pytest.mark.parametrize(("status", "reason"), [(503, "InternalError"), (403, "Forbidden"), (409, "AlreadyExists")])
def test_status_mode_answers_every_request_with_a_kubernetes_status(status, reason):
    with tcp_proxy(mode="status", status=status) as proxy:
        connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=2)
        for method, body in (("GET", None), ("POST", b'{"x": 1}')):  # two requests on one kept-alive connection
            connection.request(method, "/apis/x", body=body, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            answer = json.loads(response.read())
            assert (response.status, answer["kind"], answer["code"], answer["reason"]) == (
                status,
                "Status",
                status,
                reason,
            )
        connection.close()
        assert proxy.answered == 2 and proxy.connections == 1
        proxy.set_mode("status", status=410)
        with pytest.raises(urllib.error.HTTPError) as gone:
            _get(proxy.url + "/apis/y")
        assert gone.value.code == 410
