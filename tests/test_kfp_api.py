"""``pipelines.kfp_api`` through the real ``kfp_server_api`` client against the loopback KFP v2beta1 API stub."""

import json
import logging
import re
import ssl
import threading
import time
from pathlib import Path

import certifi
import pytest
import yaml

from pipelines import kfp_api
from pipelines.cli import main
from pipelines.kfp_api import Connection, KfpApiError
from tests.harness.tcp_proxy import closed_port, tcp_proxy

TOKEN = "sha256~Zq8-test-bearer-token-4f1c"
API = "/apis/v2beta1"


pytestmark = pytest.mark.usefixtures("no_kfp_environment")


@pytest.fixture(scope="module")
def package_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny compiled pipeline: ``a`` is required, the others have defaults; a secret as env (a platform spec)."""
    from kfp import compiler, dsl, kubernetes

    @dsl.component
    def add(a: int, b: int) -> int:
        return a + b

    @dsl.pipeline(name="add-numbers")
    def add_numbers(a: int, b: int = 2, label: str = "sum", ratio: float = 0.5, tasks: list = ["arc_easy"]):
        task = add(a=a, b=b)
        kubernetes.use_secret_as_env(task, secret_name="hf-token", secret_key_to_env={"HF_TOKEN": "HF_TOKEN"})

    path = tmp_path_factory.mktemp("package") / "add_numbers.yaml"
    compiler.Compiler().compile(add_numbers, str(path))
    return str(path)


def _connection(stub, token: str = TOKEN, **options) -> Connection:
    return Connection(host=stub.url, token=token, **options)


def _assert_bearer_everywhere(stub, token: str = TOKEN) -> None:
    assert stub.requests, "no request reached the stub"
    for request in stub.requests:
        assert request.headers.get("authorization") == f"Bearer {token}", (request.method, request.path)


# ------------------------------------------------------------------------------------------ connection options
def test_connection_from_options_reads_host_and_token_from_the_environment():
    connection = kfp_api.connection_from_options(environ={"KFP_HOST": "https://kfp.example/", "KFP_TOKEN": TOKEN})
    assert connection == Connection(host="https://kfp.example", token=TOKEN)
    assert TOKEN not in repr(connection) and TOKEN not in str(connection)
    assert "token=<hidden>" in repr(connection)


def test_connection_options_win_over_the_environment_and_the_token_file_is_stripped(tmp_path: Path):
    token_file = tmp_path / "token"
    token_file.write_text(f"  {TOKEN}\n")
    environ = {"KFP_HOST": "https://from-env", "KFP_TOKEN": "env-token"}
    connection = kfp_api.connection_from_options(
        host="http://127.0.0.1:8888", token_file=str(token_file), namespace=" team-a ", environ=environ
    )
    assert (connection.host, connection.token, connection.namespace) == ("http://127.0.0.1:8888", TOKEN, "team-a")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "no KFP API host: pass --host URL or set KFP_HOST"),
        ({"host": "kfp.example"}, "KFP host 'kfp.example' (from --host) must be an http:// or https:// URL"),
        ({"host": "https://h", "token_file": "/no/such/token"}, "cannot read the bearer token file '/no/such/token'"),
        ({"host": "https://h", "ca_bundle": "/no/such.pem"}, "CA bundle '/no/such.pem' (--ca-bundle) is not"),
        ({"host": "https://h", "ca_bundle": __file__, "insecure_skip_tls_verify": True}, "contradict each other"),
    ],
)
def test_connection_from_options_refuses_bad_options(options: dict, message: str):
    with pytest.raises(ValueError, match=re.escape(message)):
        kfp_api.connection_from_options(environ={}, **options)


@pytest.mark.parametrize(("content", "message"), [("\n", "is empty"), (f"{TOKEN}\nsecond-line", "more than one word")])
def test_bad_token_files_are_refused_without_quoting_them(tmp_path: Path, content: str, message: str):
    token_file = tmp_path / "token"
    token_file.write_text(content)
    with pytest.raises(ValueError, match=message) as error:
        kfp_api.connection_from_options(host="https://h", token_file=str(token_file), environ={})
    assert str(token_file) in str(error.value) and TOKEN not in str(error.value)


def test_tls_options_reach_the_client_configuration(kfp_api_stub, tmp_path: Path):
    ca_bundle = tmp_path / "ca.pem"
    ca_bundle.write_text("not checked until a TLS handshake\n")
    verified = kfp_api.make_client(
        kfp_api.connection_from_options(host=kfp_api_stub.url, ca_bundle=str(ca_bundle), environ={})
    )
    insecure = kfp_api.make_client(
        kfp_api.connection_from_options(host=kfp_api_stub.url, insecure_skip_tls_verify=True, environ={})
    )
    for client, verify_ssl, ca_cert, cert_reqs in (
        (verified, True, str(ca_bundle.resolve()), ssl.CERT_REQUIRED),
        (insecure, False, None, ssl.CERT_NONE),
    ):
        config = client.api_client.configuration
        assert (config.verify_ssl, config.ssl_ca_cert) == (verify_ssl, ca_cert)
        pool_settings = client.api_client.rest_client.pool_manager.connection_pool_kw
        assert (pool_settings["cert_reqs"], pool_settings["ca_certs"]) == (cert_reqs, ca_cert or certifi.where())
        assert pool_settings["retries"].total is None and pool_settings["retries"].read == 0  # one try per request
    assert [r.path for r in kfp_api_stub.requests] == [f"{API}/healthz"] * 2  # the health check, once per client


def test_a_self_signed_https_server_needs_the_ca_bundle_or_the_insecure_option(kfp_api_stub_factory, package_path):
    stub = kfp_api_stub_factory(tls=True)
    assert stub.url.startswith("https://127.0.0.1:")
    with pytest.raises(KfpApiError, match="pass --ca-bundle FILE"):
        kfp_api.make_client(Connection(host=stub.url, token=TOKEN))
    trusted = kfp_api.upload_pipeline(
        Connection(host=stub.url, token=TOKEN, ca_bundle=stub.ca_bundle), package_path, "p"
    )
    with pytest.warns(Warning, match="Unverified HTTPS request"):
        insecure = kfp_api.upload_pipeline(Connection(host=stub.url, token=TOKEN, verify_ssl=False), package_path, "p")
    assert trusted["pipeline_id"] == insecure["pipeline_id"] and trusted["version_id"] != insecure["version_id"]
    _assert_bearer_everywhere(stub)


# ------------------------------------------------------------------------------------------ upload
def test_upload_creates_the_pipeline_then_adds_versions(kfp_api_stub, package_path):
    connection = _connection(kfp_api_stub)
    first = kfp_api.upload_pipeline(connection, package_path, "add-numbers", description="adds two numbers")
    second = kfp_api.upload_pipeline(connection, package_path, "add-numbers")
    third = kfp_api.upload_pipeline(connection, package_path, "add-numbers", version_name="v3")
    assert list(kfp_api_stub.pipelines) == [first["pipeline_id"]] == [second["pipeline_id"]] == [third["pipeline_id"]]
    versions = kfp_api_stub.versions_of(first["pipeline_id"])
    assert [v["pipeline_version_id"] for v in versions] == [r["version_id"] for r in (first, second, third)]
    assert versions[0]["display_name"] == first["version_name"] == "add-numbers"
    assert re.fullmatch(r"add-numbers \d{4}-\d\d-\d\d \d\d:\d\d:\d\d [0-9a-f]{8}", second["version_name"])
    assert versions[1]["display_name"] == second["version_name"] and versions[2]["display_name"] == "v3"
    package = Path(package_path).read_bytes()
    assert all(v["pipeline_spec"] == next(yaml.safe_load_all(package)) for v in versions)
    (upload,) = kfp_api_stub.requests_to("POST", f"{API}/pipelines/upload")
    assert upload.query["name"] == ["add-numbers"] and upload.query["description"] == ["adds two numbers"]
    assert upload.multipart_files()["uploadfile"] == ("add_numbers.yaml", package)
    version_uploads = kfp_api_stub.requests_to("POST", f"{API}/pipelines/upload_version")
    assert [r.query["pipelineid"] for r in version_uploads] == [[first["pipeline_id"]]] * 2
    assert [r.query["name"] for r in version_uploads] == [[second["version_name"]], ["v3"]]
    _assert_bearer_everywhere(kfp_api_stub)


def test_uploading_a_version_name_twice_is_a_clear_api_error(kfp_api_stub, package_path):
    connection = _connection(kfp_api_stub)
    kfp_api.upload_pipeline(connection, package_path, "add-numbers")
    kfp_api.upload_pipeline(connection, package_path, "add-numbers", version_name="v2")
    with pytest.raises(KfpApiError, match=r"upload version 'v2' of pipeline 'add-numbers' failed: HTTP 409.*exists"):
        kfp_api.upload_pipeline(connection, package_path, "add-numbers", version_name="v2")


def test_the_namespace_reaches_the_upload_and_the_experiment(kfp_api_stub, package_path):
    connection = _connection(kfp_api_stub, namespace="team-a")
    uploaded = kfp_api.upload_pipeline(connection, package_path, "add-numbers")
    again = kfp_api.upload_pipeline(connection, package_path, "add-numbers")
    run = kfp_api.create_run(connection, package_path, {"a": 1}, experiment_name="team-exp")
    assert kfp_api_stub.pipelines[uploaded["pipeline_id"]]["namespace"] == "team-a"
    assert again["pipeline_id"] == uploaded["pipeline_id"]  # found by name within the namespace
    assert kfp_api_stub.experiments[run["experiment_id"]]["namespace"] == "team-a"
    listings = kfp_api_stub.requests_to("GET", f"{API}/pipelines") + kfp_api_stub.requests_to(
        "GET", f"{API}/experiments"
    )
    assert listings and all(r.query["namespace"] == ["team-a"] for r in listings)
    (upload,) = kfp_api_stub.requests_to("POST", f"{API}/pipelines/upload")
    assert upload.query["namespace"] == ["team-a"]


# ------------------------------------------------------------------------------------------ arguments
def test_load_arguments_puts_flags_over_the_file_and_parses_json_values(tmp_path: Path):
    params_file = tmp_path / "params.yaml"
    params_file.write_text("a: 1\nratio: 0.25\nlabel: from-file\n")
    arguments = kfp_api.load_arguments(
        ["a=5", "label=hello world", 'tasks=["arc_easy", "hellaswag"]', "flag=true", 'quoted="7"', "eq=x=y"],
        str(params_file),
    )
    assert arguments == {
        "a": 5,
        "ratio": 0.25,
        "label": "hello world",
        "tasks": ["arc_easy", "hellaswag"],
        "flag": True,
        "quoted": "7",
        "eq": "x=y",
    }


@pytest.mark.parametrize(
    ("params", "file_text", "message"),
    [
        (["a=1", "novalue"], None, "--param #2 'novalue': expected KEY=VALUE"),
        (["=3"], None, "--param #1 '=3': expected KEY=VALUE"),
        (["a=1", "a=2"], None, "--param #2 'a=2': parameter 'a' is given twice"),
        ([], "a: 1\nb: [1, 2\nc: 3\n", "params.yaml:3: the parameters file (--params-file) is not valid YAML/JSON"),
        ([], "- a\n- b\n", "must hold a mapping of parameter name to value, not a list"),
        ([], "1: x\n", "parameter name 1 (--params-file) must be a string"),
    ],
)
def test_load_arguments_names_the_bad_entry(tmp_path: Path, params: list, file_text: str | None, message: str):
    params_file = tmp_path / "params.yaml"
    if file_text is not None:
        params_file.write_text(file_text)
    with pytest.raises(ValueError, match=re.escape(message)):
        kfp_api.load_arguments(params, str(params_file) if file_text is not None else "")


def test_load_arguments_names_a_missing_file(tmp_path: Path):
    with pytest.raises(ValueError, match=r"cannot read the parameters file '.*nope.yaml' \(--params-file\)"):
        kfp_api.load_arguments([], str(tmp_path / "nope.yaml"))


# ------------------------------------------------------------------------------------------ run
def test_run_sends_the_spec_and_the_arguments_from_flags_and_file(kfp_api_stub, package_path, tmp_path: Path):
    params_file = tmp_path / "params.json"
    params_file.write_text(json.dumps({"a": 1, "ratio": 0.25}))
    arguments = kfp_api.load_arguments(["a=40", "label=answer"], str(params_file))
    connection = _connection(kfp_api_stub)
    first = kfp_api.create_run(connection, package_path, arguments, run_name="first", experiment_name="nightly")
    second = kfp_api.create_run(connection, package_path, {"a": 1}, experiment_name="nightly")
    assert list(kfp_api_stub.experiments) == [first["experiment_id"]] == [second["experiment_id"]]
    assert kfp_api_stub.experiments[first["experiment_id"]]["display_name"] == "nightly"
    run = kfp_api_stub.runs[first["run_id"]]
    assert run["display_name"] == "first" and run["experiment_id"] == first["experiment_id"]
    assert run["runtime_config"]["parameters"] == {"a": 40, "ratio": 0.25, "label": "answer"}
    compiled_spec, compiled_platform = yaml.safe_load_all(Path(package_path).read_text())
    sent_spec, sent_platform = run["pipeline_spec"]["pipeline_spec"], run["pipeline_spec"]["platform_spec"]
    assert sent_spec["pipelineInfo"] == compiled_spec["pipelineInfo"] and sent_spec["root"] == compiled_spec["root"]
    assert sent_platform == compiled_platform  # the secret-as-env settings travel with the run
    assert re.fullmatch(
        r"add-numbers \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", kfp_api_stub.runs[second["run_id"]]["display_name"]
    )
    assert len(kfp_api_stub.requests_to("POST", f"{API}/experiments")) == 1
    _assert_bearer_everywhere(kfp_api_stub)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"a": 1, "lable": "x"}, "parameter 'lable' is not a parameter of pipeline"),
        ({"a": "one"}, "parameter 'a' of pipeline .* is NUMBER_INTEGER and needs an integer, got 'one'"),
        ({"a": 1, "label": 1.1}, "is STRING and needs a string, got 1.1 .*quote it: --param 'label=\"1.1\"'"),
        ({"a": 1, "tasks": "arc_easy"}, "is LIST and needs a JSON list"),
        ({"b": 3}, "needs a value for a: pass --param"),
    ],
)
def test_run_refuses_arguments_the_pipeline_does_not_take_before_sending_anything(
    kfp_api_stub, package_path, arguments: dict, message: str
):
    with pytest.raises(ValueError, match=message):
        kfp_api.create_run(_connection(kfp_api_stub), package_path, arguments)
    assert kfp_api_stub.requests == []


# ------------------------------------------------------------------------------------------ schedule
def test_schedule_with_cron(kfp_api_stub, package_path):
    result = kfp_api.schedule_run(
        _connection(kfp_api_stub),
        package_path,
        {"a": 3},
        job_name="nightly-add",
        experiment_name="schedules",
        cron=" 0 0 2 * * MON-FRI ",
        max_concurrency=2,
    )
    recurring_run = kfp_api_stub.recurring_runs[result["recurring_run_id"]]
    assert recurring_run["trigger"] == {"cron_schedule": {"cron": "0 0 2 * * MON-FRI"}}
    expected = ("nightly-add", "ENABLE", True)
    assert (recurring_run["display_name"], recurring_run["mode"], recurring_run["no_catchup"]) == expected
    assert recurring_run["max_concurrency"] == "2" and recurring_run["runtime_config"]["parameters"] == {"a": 3}
    assert kfp_api_stub.experiments[result["experiment_id"]]["display_name"] == "schedules"
    assert recurring_run["experiment_id"] == result["experiment_id"]
    _assert_bearer_everywhere(kfp_api_stub)


def test_schedule_with_interval_disabled_and_catching_up(kfp_api_stub, package_path):
    result = kfp_api.schedule_run(
        _connection(kfp_api_stub),
        package_path,
        {"a": 3},
        job_name="hourly-add",
        interval_seconds=3600,
        enabled=False,
        no_catchup=False,
    )
    recurring_run = kfp_api_stub.recurring_runs[result["recurring_run_id"]]
    assert int(recurring_run["trigger"]["periodic_schedule"]["interval_second"]) == 3600
    assert "cron_schedule" not in recurring_run["trigger"]
    expected = ("DISABLE", "DISABLED", False)
    assert (recurring_run["mode"], recurring_run["status"], recurring_run["no_catchup"]) == expected
    assert kfp_api_stub.experiments[result["experiment_id"]]["display_name"] == "Default"


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("0 2 * * *", "has 5 fields, .* did you mean '0 0 2 \\* \\* \\*'"),
        ("0 0 2 * *  * *", "has 7 fields"),
        ("60 0 2 * * *", "second field '60' is not valid \\(values 0-59,"),
        ("0 0 24 * * *", "hour field '24' is not valid \\(values 0-23,"),
        ("0 0 2 0 * *", "day-of-month field '0' is not valid \\(values 1-31,"),
        ("0 0 2 * 13 *", "month field '13' is not valid \\(values 1-12 or JAN-DEC,"),
        ("0 0 2 * * FUN", "day-of-week field 'FUN' is not valid \\(values 0-6 or SUN-SAT,"),
        ("0 */0 * * * *", "minute field '\\*/0' is not valid"),
        ("0 0 x * * *", "hour field 'x' is not valid"),
        ("@fortnightly", "unknown descriptor"),
        ("@every 0s", "unknown descriptor"),
        ("", "exactly one of --cron EXPR or --interval SECONDS; neither was given"),
    ],
)
def test_bad_cron_is_refused_before_sending_anything(kfp_api_stub, package_path, cron: str, message: str):
    with pytest.raises(ValueError, match=message):
        kfp_api.schedule_run(_connection(kfp_api_stub), package_path, {"a": 1}, job_name="j", cron=cron)
    assert kfp_api_stub.requests == []


@pytest.mark.parametrize(
    "cron",
    ["0 0 9 ? * 2-6", "*/30 */15 * * * *", "0 0 2 1,15 JAN-jun sun", "0 30 1/2 * * *", "@daily", "@every 1h30m"],
)
def test_valid_cron_expressions_pass(cron: str):
    assert kfp_api.validate_cron(f" {cron} ") == cron


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cron": "0 0 2 * * *", "interval_seconds": 60}, "exactly one of --cron EXPR or --interval SECONDS; both"),
        ({"interval_seconds": -5}, r"interval -5 \(--interval\) must be a positive whole number of seconds"),
        ({"interval_seconds": 0}, r"interval 0 \(--interval\) must be a positive whole number of seconds"),
        ({"interval_seconds": 60, "max_concurrency": 11}, "max concurrency 11 must be a whole number from 1 to 10"),
        ({"interval_seconds": 60, "max_concurrency": 0}, "max concurrency 0 must be"),
        ({"interval_seconds": 60, "job_name": " "}, r"the recurring run name \(--name\) is empty"),
    ],
)
def test_bad_schedule_options_are_refused(kfp_api_stub, package_path, options: dict, message: str):
    options = {"job_name": "j", **options}
    with pytest.raises(ValueError, match=message):
        kfp_api.schedule_run(_connection(kfp_api_stub), package_path, {"a": 1}, **options)
    assert kfp_api_stub.requests == []


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("params.yaml", b"a: 1\n", "is not a compiled KFP pipeline"),
        ("p.json", None, r"expected a compiled pipeline YAML \(.yaml or .yml\)"),
        (
            "broken.yaml",
            b"\x89PNG\r\n\x1a\n\x00\xff\xfe binary",
            r"'[^']*broken\.yaml' is not a text file \(not UTF-8 at byte \d+\)",
        ),
        ("broken.yaml", b"a: [1, 2\nb: 3\n", r"'[^']*broken\.yaml' is not valid YAML: "),
    ],
    ids=["not-a-pipeline", "not-yaml", "binary", "bad-yaml"],
)
def test_a_package_that_is_not_a_compiled_pipeline_is_one_line_and_nothing_is_sent(
    kfp_api_stub, tmp_path: Path, name, content, message
):
    package = tmp_path / name
    if content is not None:
        package.write_bytes(content)
    with pytest.raises(ValueError, match=message) as error:
        kfp_api.upload_pipeline(_connection(kfp_api_stub), str(package), "p")
    assert "\n" not in str(error.value)
    assert kfp_api_stub.requests == []


def test_schedule_interval_zero_on_the_command_line_is_given_not_absent():
    from pipelines.cli import build_parser

    parsed = build_parser().parse_args(["schedule", "sft", "--interval", "0"])
    assert parsed.interval == 0 and parsed.cron == ""  # given, not "absent": refused (test_bad_schedule_options)
    assert build_parser().parse_args(["schedule", "sft", "--cron", "@daily"]).interval is None


# ------------------------------------------------------------------------------------------ secrets and API errors
def test_the_token_never_appears_in_output_logs_or_results(
    kfp_api_stub, package_path, tmp_path: Path, capsys: pytest.CaptureFixture, caplog: pytest.LogCaptureFixture
):
    caplog.set_level(logging.DEBUG)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    connection = kfp_api.connection_from_options(host=kfp_api_stub.url, token_file=str(token_file), environ={})
    results = [
        kfp_api.upload_pipeline(connection, package_path, "add-numbers"),
        kfp_api.create_run(connection, package_path, {"a": 1}),
        kfp_api.schedule_run(connection, package_path, {"a": 1}, job_name="j", cron="@hourly"),
        repr(connection),
    ]
    captured = capsys.readouterr()
    assert "sent unencrypted" in caplog.text  # the http:// warning names the host, not the token
    for text in (captured.out, captured.err, caplog.text, repr(results)):
        assert TOKEN not in text
    assert results[1]["run_id"] in kfp_api_stub.runs  # the calls did happen
    _assert_bearer_everywhere(kfp_api_stub)


def test_a_rejected_token_is_a_clear_error_that_hides_it(kfp_api_stub_factory, package_path):
    stub = kfp_api_stub_factory(required_token="the-right-token")
    wrong = "sha256~wrong-token-value"
    with pytest.raises(KfpApiError) as error:
        kfp_api.upload_pipeline(Connection(host=stub.url, token=wrong), package_path, "add-numbers")
    assert "look up pipeline 'add-numbers' failed: HTTP 401" in str(error.value)
    assert "refresh it with `oc whoami -t`" in str(error.value) and wrong not in str(error.value)
    assert stub.pipelines == {}


def test_an_unreachable_host_is_a_clear_error():
    port = closed_port()
    with pytest.raises(KfpApiError, match=rf"cannot reach the KFP API at http://127.0.0.1:{port} to check health"):
        kfp_api.make_client(Connection(host=f"http://127.0.0.1:{port}", token=TOKEN))


def test_a_host_answering_html_pages_is_a_clear_error(kfp_api_stub_factory, package_path):
    stub = kfp_api_stub_factory(html_pages=True)
    with pytest.raises(KfpApiError, match=r"answered text/html; charset=utf-8, not a KFP health report: check"):
        kfp_api.upload_pipeline(Connection(host=stub.url, token=TOKEN), package_path, "add-numbers")
    assert [r.path for r in stub.requests] == [f"{API}/healthz"]


def test_a_host_without_the_api_fails_fast_with_a_hint(kfp_api_stub):
    with pytest.raises(KfpApiError, match=r"HTTP 404 Not Found: no such API route.*check that --host is the pipelines"):
        kfp_api.make_client(Connection(host=f"{kfp_api_stub.url}/dashboard", token=TOKEN))
    assert len(kfp_api_stub.requests) == 1


# ------------------------------------------------------------------------------------------ deadlines
# Against a KFP API that accepts connections but never answers, each call ends within the request timeout plus slack,
# in one line saying what did not answer and what to do, without the token.
CALLS = {
    "upload": lambda connection, package: kfp_api.upload_pipeline(connection, package, "p"),
    "run": lambda connection, package: kfp_api.create_run(connection, package, {"a": 1}),
    "schedule": lambda connection, package: kfp_api.schedule_run(connection, package, {"a": 1}, "j", cron="@daily"),
}


@pytest.mark.parametrize("call", CALLS)
def test_a_health_check_that_never_answers_fails_within_the_timeout(package_path, call):
    with tcp_proxy(mode="blackhole") as proxy:
        connection = Connection(host=proxy.url, token=TOKEN, timeout_seconds=1)
        began = time.monotonic()
        with pytest.raises(KfpApiError) as error:
            CALLS[call](connection, package_path)
        elapsed = time.monotonic() - began
    # Bound: one request of at most (connect 1 s, read 1 s), no retries.
    assert elapsed < 1 + 1 + 1.5, elapsed
    message = str(error.value)
    assert message.startswith(f"cannot reach the KFP API at {proxy.url} to check health (GET {API}/healthz): ")
    assert "Read timed out" in message and "no answer within 1 s" in message and "--request-timeout" in message
    assert "\n" not in message and TOKEN not in message
    assert proxy.connections == 1


def test_a_refused_connection_says_it_was_refused_not_that_it_timed_out(package_path):
    closed = f"http://127.0.0.1:{closed_port()}"
    connection = Connection(host=closed, token=TOKEN, timeout_seconds=60)
    began = time.monotonic()
    with pytest.raises(KfpApiError) as error:
        kfp_api.upload_pipeline(connection, package_path, "p")
    assert time.monotonic() - began < 10
    message = str(error.value)
    assert "the connection was refused at once: check --host and its port" in message, message
    assert "no answer within" not in message and "--request-timeout" not in message


def test_a_server_that_stops_answering_after_the_health_check_fails_the_call_within_the_timeout(
    kfp_api_stub, package_path
):
    """The health check answers, then the stub's handler holds every request: the pipeline lookup fails in 1 s."""
    answer = kfp_api_stub.handle
    release = threading.Event()

    def stop_answering_after_the_health_check(request):
        if request.path != f"{API}/healthz":
            release.wait(30)  # until the test has its answer: a server that stopped answering
        return answer(request)

    kfp_api_stub.handle = stop_answering_after_the_health_check
    began = time.monotonic()
    try:
        with pytest.raises(KfpApiError) as error:
            kfp_api.upload_pipeline(
                Connection(host=kfp_api_stub.url, token=TOKEN, timeout_seconds=1), package_path, "p"
            )
        elapsed = time.monotonic() - began
    finally:
        release.set()
    assert elapsed < 1 + 1 + 3, elapsed
    message = str(error.value)
    assert message.startswith(f"cannot reach the KFP API at {kfp_api_stub.url} to look up pipeline 'p': "), message
    assert "no answer within 1 s" in message and "\n" not in message and TOKEN not in message
    assert [r.path for r in kfp_api_stub.requests][0] == f"{API}/healthz"
    assert kfp_api_stub.pipelines == {}


def test_the_cli_reports_a_hung_api_in_one_line(package_path, capsys, monkeypatch):
    monkeypatch.setenv("KFP_TOKEN", TOKEN)
    with tcp_proxy(mode="blackhole") as proxy:
        began = time.monotonic()
        code = main(["upload", package_path, "--host", proxy.url, "--request-timeout", "1"])
        elapsed = time.monotonic() - began
    err = capsys.readouterr().err
    assert code == 1 and elapsed < 1 + 1 + 3, elapsed  # (slack: the first import of kfp.Client falls in the window)
    assert err.startswith("kfp-finetune upload: failed: cannot reach the KFP API") and err.count("\n") == 1
    assert TOKEN not in err


def test_the_request_timeout_must_be_positive():
    with pytest.raises(ValueError, match=r"request timeout 0 \(--request-timeout\) must be a positive number"):
        kfp_api.connection_from_options(host="https://kfp.example", timeout_seconds=0, environ={})
    assert Connection(host="h", timeout_seconds=30).request_timeout == (10.0, 30)
    assert Connection(host="h", timeout_seconds=2).request_timeout == (2, 2)


def test_every_request_of_upload_run_and_schedule_carries_a_tuple_timeout(kfp_api_stub, package_path, monkeypatch):
    from kfp_server_api import rest

    seen = []
    original = rest.RESTClientObject.request

    def recording(self, method, url, *args, **kwargs):
        seen.append((method, url.split("?")[0], kwargs.get("_request_timeout")))
        return original(self, method, url, *args, **kwargs)

    monkeypatch.setattr(rest.RESTClientObject, "request", recording)
    connection = Connection(host=kfp_api_stub.url, token=TOKEN, timeout_seconds=7)
    kfp_api.upload_pipeline(connection, package_path, "p")
    kfp_api.upload_pipeline(connection, package_path, "p")  # a new version
    kfp_api.create_run(connection, package_path, {"a": 1})
    kfp_api.schedule_run(connection, package_path, {"a": 1}, job_name="j", cron="@daily")
    assert len(seen) == len(kfp_api_stub.requests) >= 12
    assert {timeout for _, _, timeout in seen} == {(7, 7)}, seen
    assert rest.RESTClientObject.request is recording  # nothing replaced kfp_server_api's own method
