"""What the cluster tests share: a poll-mode run on a fake clock, its cluster script, a client through the TCP proxy."""

from components._common.kube_auth import load_api_client
from tests.harness.requests import run_job


def poll(kube_api, manifest, clock, log, **overrides):
    """Runs ``manifest`` in poll mode on ``clock``: start timeout 300 s, total 3600 s, one request per 10 s."""
    options = dict(start_timeout_seconds=300, timeout_seconds=3600, poll_interval_seconds=10, use_watch=False)
    options |= dict(clock=clock, sleep=clock.sleep, log=log)
    return run_job(kube_api.api_client, manifest, **{**options, **overrides})


def at(steps):
    """A fake-clock script: at each time (seconds) apply the cluster action once, in order."""
    done = set()

    def script(now):
        for index, (when, action) in enumerate(steps):
            if now >= when and index not in done:
                done.add(index)
                action()

    return script


def proxied_client(proxy):
    """A client built the way the component builds it (``load_api_client``), pointed at the proxy."""
    environ = {"KUBERNETES_SERVER_URL": proxy.url, "KUBERNETES_AUTH_TOKEN": "sha256~test-token"}
    return load_api_client(environ=environ, log=lambda line: None)


def upstream(kube_api):
    """``(host, port)`` of kmock's API, for the proxy to forward to."""
    host, port = kube_api.url.split("//", 1)[1].rsplit(":", 1)
    return host, int(port)
