"""Secrets masked by value in every format, in printed output, logs and exceptions; patterns for unseen ones."""

from __future__ import annotations

import json
import logging

import pytest

from components._common import masking
from components._common.masking import mask_data, mask_text, masked, register_secret

TOKEN = "Zq9xLmN4pW7rT2vKc8"
AWS = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzz"


@pytest.fixture
def secrets(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS)
    monkeypatch.setattr(masking, "_registered", set())


@pytest.mark.parametrize(
    "text",
    [
        repr({"hub": TOKEN, "other": AWS}),
        json.dumps({"client": {"hub": TOKEN, "key": AWS}}),
        f"downloader --hub-credential {TOKEN} --key={AWS}",
        f"https://s3.example.com/b?X-Sig={AWS.replace('/', '%2F').replace('+', '%2B')}&t={TOKEN}",
        json.dumps(json.dumps({"nested": TOKEN})),
    ],
)
def test_known_values_are_masked_whatever_the_format(secrets, text):
    masked_text = mask_text(text)
    assert TOKEN not in masked_text and AWS not in masked_text and "wJalrXUtnFEMI%2F" not in masked_text
    assert "***" in masked_text


def test_patterns_still_catch_values_never_seen(secrets):
    assert mask_text("Authorization: Bearer abcdefghijkl") == "Authorization: Bearer ***"
    assert mask_text("HF token hf_0123456789abcdefXYZ used") == "HF token *** used"
    assert mask_text("password: hunter22 and more") == "password: *** and more"
    assert mask_text("--token s3cr3tv4lue --epochs 3") == "--token *** --epochs 3"
    assert mask_text('{"api_key": "abc123xyz"}') == '{"api_key": "***"}'
    assert mask_text("{'password': 'abc123xyz'}") == "{'password': '***'}"
    assert mask_text("http://user:pa55word@host/x") == "http://user:***@host/x"
    assert mask_text("epochs=3 lr=0.0002 steps: 10") == "epochs=3 lr=0.0002 steps: 10"


def test_json_secret_leaves_and_registered_tokens(secrets, monkeypatch):
    auth = "cXVheTpwdWxsc2VjcmV0MTIz"
    monkeypatch.setenv("OCI_PULL_SECRET_MODEL_DOWNLOAD", json.dumps({"auths": {"quay.io": {"auth": auth}}}))
    register_secret("registry-token-0042")
    text = mask_text(f"pull auth {auth}; bearer registry-token-0042")
    assert auth not in text and "registry-token-0042" not in text
    assert mask_data({"a": [f"x {TOKEN}"], "n": 3}) == {"a": ["x ***"], "n": 3}


def test_masked_function_masks_stdout_logs_and_exceptions(secrets, capsys, caplog):
    handler = logging.StreamHandler()
    logging.getLogger().addHandler(handler)

    @masked
    def leaky() -> None:
        print({"hub": TOKEN})
        logging.getLogger("leaky").warning("key %s", AWS)
        try:
            raise OSError(f"connect with {TOKEN}")
        except OSError as cause:
            raise ValueError(f"failed: {{'k': '{AWS}'}}") from cause

    try:
        with pytest.raises(ValueError) as error:
            leaky()
    finally:
        logging.getLogger().removeHandler(handler)
    out, err = capsys.readouterr()
    everything = out + err + str(error.value) + str(error.value.__cause__)
    assert TOKEN not in everything and AWS not in everything
    assert "{'hub': '***'}" in out and "failed: {'k': '***'}" in str(error.value)


def test_signed_url_parameters_are_masked_in_every_output_keeping_the_url_readable(secrets):
    from components._common.masking import mask_url

    url = (
        "https://b.s3.amazonaws.com/d/train.jsonl?X-Amz-Algorithm=AWS4-HMAC-SHA256"
        "&X-Amz-Credential=AKIAEXAMPLE%2F20261125%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Expires=3600"
        "&X-Amz-Security-Token=FwoGZXIvYXdzEXAMPLE&X-Amz-Signature=abcdef0123456789"
    )
    expected = (
        "https://b.s3.amazonaws.com/d/train.jsonl?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=***"
        "&X-Amz-Expires=3600&X-Amz-Security-Token=***&X-Amz-Signature=***"
    )
    assert mask_url(url) == expected
    assert mask_text(url, patterns=False) == expected  # artifacts (metadata, reports) too, not only logs
    assert mask_data({"source_uri": url}, patterns=False) == {"source_uri": expected}
    sas = "https://a.blob.core.windows.net/c/t.jsonl?sv=2022-11-02&sig=AbC%2Bdef%3D&se=2026&Signature=x1&token=t2"
    assert (
        mask_url(sas)
        == "https://a.blob.core.windows.net/c/t.jsonl?sv=2022-11-02&sig=***&se=2026&Signature=***&token=***"
    )
    assert mask_url("https://host/a.jsonl?design=1&signal=2") == "https://host/a.jsonl?design=1&signal=2"


def test_pod_log_patterns_cover_basic_auth_jwts_and_url_userinfo_with_any_characters(secrets):
    import base64

    basic = base64.b64encode(b"alice:p/ss:w@rd+1").decode()
    assert mask_text(f"Authorization: Basic {basic}") == "Authorization: Basic ***"
    assert mask_text(f"curl -H 'authorization: basic {basic}' x") == "curl -H 'authorization: basic ***' x"
    assert mask_text(f"header Basic {basic} sent") == "header Basic *** sent"
    assert mask_text("Basic training and basic arithmetic") == "Basic training and basic arithmetic"
    jwt = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2lnbmF0dXJlLXZhbHVlLWhlcmU"
    assert mask_text(f"token {jwt} expired") == "token *** expired"
    assert mask_text(f'{{"id_token": "{jwt}"}}') == '{"id_token": "***"}'
    assert mask_text("fetch s3://AKIAID:wJal/rXU+tn@minio.local:9000/b/k failed") == (
        "fetch s3://AKIAID:***@minio.local:9000/b/k failed"
    )
    assert mask_text("https://user:p@ss:w/rd@host/x.jsonl ok") == "https://user:***@host/x.jsonl ok"
    assert mask_text("git clone https://ghp_abcdef123456@github.com/o/r") == "git clone https://***@github.com/o/r"
    assert mask_text("see http://host:8080/path and ssh://git@github.com/o/r") == (
        "see http://host:8080/path and ssh://git@github.com/o/r"
    )


def test_oci_digest_references_are_not_mistaken_for_userinfo():
    from components._common.masking import mask_url

    digest = "sha256:" + "6e" * 32
    assert mask_url(f"oci://127.0.0.1:40487/models/tiny@{digest}") == f"oci://127.0.0.1:40487/models/tiny@{digest}"
    masked = mask_url(f"oci://robot:pa/ss@quay.io/models/tiny@{digest}")
    assert masked == f"oci://robot:***@quay.io/models/tiny@{digest}"


GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
GITLAB = "glpat-Ab12Cd34Ef56Gh78Ij90"
PEM_BODY = "MIIEowIBAAKCAQEAx3f9Tq1exampleKEYbody0123456789abcdefABCDEF+/=="
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\nQ2hlY2sgbWU=\n-----END RSA PRIVATE KEY-----"
DOCKER_AUTH = "YWxpY2U6czNjcjN0LXB1bGwtcGFzcw=="  # base64 of "alice:s3cr3t-pull-pass"


@pytest.mark.parametrize(
    "text, secret",
    [
        (f"pod log: pushing with {GITHUB}", GITHUB),
        (f"token github_pat_{'x1Y2' * 10} used", "github_pat_"),
        (f"clone failed: {GITLAB}", GITLAB),
        (f"container log:\n{PEM}\nstarting", PEM_BODY),
        (json.dumps({"message": f"key {PEM}"}), PEM_BODY),  # quoted: JSON-escaped newlines
        (f"last lines:\n-----BEGIN PRIVATE KEY-----\n{PEM_BODY}", PEM_BODY),  # a log tail cut in the middle
        (json.dumps({"auths": {"quay.io": {"auth": DOCKER_AUTH}}}), DOCKER_AUTH),
        (f"auths:\n  quay.io:\n    auth: {DOCKER_AUTH}\n", DOCKER_AUTH),
        ('JobFailed: {"password": "Xy12abcdef"}', "Xy12abcdef"),
        ("secret: s3cr3t-Value-9\n", "s3cr3t-Value-9"),
        ("password: \"s3cr3t-Value\"\ntoken: 'abc123def456'", "s3cr3t-Value"),
        (json.dumps(json.dumps({"client_secret": "Zz9-secret-value"})), "Zz9-secret-value"),
    ],
    ids="github github-pat gitlab pem pem-quoted pem-cut docker-json docker-yaml json yaml yaml-quoted escaped".split(),
)
def test_secrets_never_given_are_masked_in_pod_logs_and_job_failures(secrets, text, secret):
    masked_text = mask_text(text)
    assert secret not in masked_text and "***" in masked_text


@pytest.mark.parametrize(
    "text",
    [
        "token check failed",
        "authorization: check the service account",
        "secret: check",
        "token: check the value",
        "--token check",
        "password=required",
        "auth: none",
        "pad_token: <|pad|>",
        "secret_name: hf-token-secret",
        "the author: Jane",
        'client_secret: "check"',
    ],
)
def test_ordinary_words_after_a_secrets_key_are_never_masked(secrets, text):
    assert mask_text(text) == text


def test_a_private_key_printed_line_by_line_is_masked_across_writes(secrets):
    import io

    sink = io.StringIO()
    stream = masking.MaskingStream(sink)
    for line in ["before\n", *[line + "\n" for line in PEM.splitlines()], "after\n"]:
        stream.write(line)
    assert PEM_BODY not in sink.getvalue() and "Q2hlY2sgbWU=" not in sink.getvalue()
    assert sink.getvalue().startswith("before\n") and sink.getvalue().endswith("-----END RSA PRIVATE KEY-----\nafter\n")


def test_unmistakable_secrets_are_masked_in_artifacts_too_ordinary_data_is_not(secrets):
    text = f'{{"note": "pushed with {GITHUB}", "key": "{PEM}", "pad_token": "<|pad|>", "gl": "{GITLAB}"}}'
    masked_text = mask_text(text, patterns=False)
    assert GITHUB not in masked_text and PEM_BODY not in masked_text and GITLAB not in masked_text
    assert '"pad_token": "<|pad|>"' in masked_text
