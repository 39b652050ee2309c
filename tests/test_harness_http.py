"""The HTTP file server fixture serves nothing outside its root (files, statuses and delays: the dataset tests)."""

import urllib.error
import urllib.request

import pytest


def test_missing_file_and_path_escape_are_404(http_file_server):
    (http_file_server.root.parent / "secret.txt").write_text("no")
    for relative in ("absent.jsonl", "../secret.txt", "%2e%2e/secret.txt"):
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(http_file_server.url_for(relative), timeout=5)
        assert error.value.code == 404
