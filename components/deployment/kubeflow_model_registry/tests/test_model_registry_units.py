"""Unit tests of the pure modules of the model_registry component (no network)."""

import datetime
import json

import pytest

from components._common.files import write_text_atomically
from components.deployment.kubeflow_model_registry.gates import evaluate_gate
from components.deployment.kubeflow_model_registry.lineage import (
    ArtifactInfo,
    RunInfo,
    flatten_properties,
    known_run_value,
    lineage_properties,
    metric_values,
    scalar_property,
)
from components.deployment.kubeflow_model_registry.model_uri import (
    files_to_upload,
    model_files_dir,
    parse_s3_uri,
    pvc_uri,
    resolve_serving_uri,
    validate_serving_uri,
)
from components.deployment.kubeflow_model_registry.registration import (
    check_registration_names,
    default_model_name,
    derived_version_name,
    validate_name,
)
from components.deployment.kubeflow_model_registry.registry_client import RetryPolicy
from components.deployment.kubeflow_model_registry.registry_endpoint import (
    RegistryEndpoint,
    make_endpoint,
    read_bearer_token,
    registry_base_url,
)
from components.deployment.kubeflow_model_registry.request import RegistryOptions
from components.deployment.kubeflow_model_registry.summary import render_summary
from tests.harness.requests import dataset_metadata

NO_SA_TOKEN = "/nonexistent/serviceaccount/token"


# ---- registry_endpoint, registry_client ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "port", "secure", "expected"),
    [
        ("registry.example.com", 443, True, "https://registry.example.com:443"),
        ("https://registry.example.com", 8443, True, "https://registry.example.com:8443"),
        ("https://registry.example.com:9443/", 443, True, "https://registry.example.com:9443"),
        ("model-registry-service.ns.svc", 8080, False, "http://model-registry-service.ns.svc:8080"),
        ("http://127.0.0.1", 5000, False, "http://127.0.0.1:5000"),
    ],
)
def test_registry_base_url(address, port, secure, expected):
    assert registry_base_url(address, port, secure) == expected


@pytest.mark.parametrize(
    ("address", "port", "message"),
    [
        ("ftp://registry", 443, "expected a host name or an http"),
        ("https://registry/api/model_registry/v1", 443, "give the host only"),
        ("registry", 0, "registry_port=0"),
    ],
)
def test_registry_base_url_rejects(address, port, message):
    with pytest.raises(ValueError, match=message):
        registry_base_url(address, port, True)


def test_token_precedence_and_sources(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("file-token\n")
    sa_file = tmp_path / "sa-token"
    sa_file.write_text("sa-token")
    env = {"MODEL_REGISTRY_TOKEN": "env-token", "MODEL_REGISTRY_TOKEN_PATH": str(token_file)}
    assert read_bearer_token(env, str(sa_file)) == ("env-token", "env var MODEL_REGISTRY_TOKEN")
    assert read_bearer_token({"MODEL_REGISTRY_TOKEN_PATH": str(token_file)}, str(sa_file))[0] == "file-token"
    assert read_bearer_token({"KF_PIPELINES_SA_TOKEN_PATH": str(token_file)}, str(sa_file))[0] == "file-token"
    token, source = read_bearer_token({}, str(sa_file))
    assert token == "sa-token" and "sa-token" not in source.replace(str(sa_file), "")
    assert read_bearer_token({}, NO_SA_TOKEN)[0] is None


def test_token_file_errors_name_the_file(tmp_path):
    with pytest.raises(ValueError, match="cannot be read"):
        read_bearer_token({"MODEL_REGISTRY_TOKEN_PATH": str(tmp_path / "missing")}, NO_SA_TOKEN)
    (tmp_path / "empty").write_text("  \n")
    with pytest.raises(ValueError, match="is empty"):
        read_bearer_token({"MODEL_REGISTRY_TOKEN_PATH": str(tmp_path / "empty")}, NO_SA_TOKEN)


def _endpoint(address, port, secure, ca="", environ=None):
    return make_endpoint(RegistryOptions(address, port, secure, ca, False), environ or {}, NO_SA_TOKEN)


def test_endpoint_never_shows_the_token():
    endpoint = _endpoint("https://r.example.com", 443, True, environ={"MODEL_REGISTRY_TOKEN": "s3cr3t"})
    assert endpoint.token == "s3cr3t"
    assert "s3cr3t" not in repr(endpoint) and "s3cr3t" not in str(endpoint)


def test_endpoint_rules(tmp_path):
    with pytest.raises(ValueError, match="plain http but is_secure=True"):
        _endpoint("http://r", 80, True, environ={"MODEL_REGISTRY_TOKEN": "t"})
    with pytest.raises(ValueError, match="ca_bundle_path='/nope.pem': no such file"):
        _endpoint("https://r", 443, True, "/nope.pem", {"MODEL_REGISTRY_TOKEN": "t"})
    with pytest.raises(ValueError, match="no bearer token was found"):
        _endpoint("https://r", 443, True)
    insecure = _endpoint("r", 8080, False)
    assert insecure == RegistryEndpoint("http://r:8080", False, "", None, insecure.token_source)


def test_retry_delays_grow_and_are_capped():
    policy = RetryPolicy(attempts=6, initial_delay_s=1.0, max_delay_s=3.0, factor=2.0)
    delays = [policy.delay_s(i) for i in range(5)]
    assert 1.0 <= delays[0] <= 1.1 and 2.0 <= delays[1] <= 2.2
    assert all(3.0 <= d <= 3.3 for d in delays[2:])


# ---- lineage -----------------------------------------------------------------------------------------------------


def test_scalar_property_types():
    assert scalar_property(True) is True
    assert scalar_property(7) == 7
    assert scalar_property(2**40) == str(2**40)  # beyond the registry's int32
    assert scalar_property(0.25) == 0.25
    assert scalar_property(float("inf")) == "inf"
    assert scalar_property([1, 2]) == "[1, 2]"
    assert scalar_property(None) is None
    assert scalar_property("x" * 5000).endswith("...(truncated)")


def test_flatten_drops_credential_like_keys():
    flat = flatten_properties(
        "hyperparameter", {"lr": 1e-4, "hf_token": "hf_xxx", "optim": {"name": "adamw", "api_key": "k"}}
    )
    assert flat == {"hyperparameter.lr": 1e-4, "hyperparameter.optim.name": "adamw"}


def test_lineage_properties_cover_run_data_model_training_and_metrics():
    model = ArtifactInfo(
        "s3://pipelines/run/model",
        "/tmp/model",
        {
            "base_model": "ibm-granite/granite-3.1-2b",
            "algorithm": "lora",
            "hyperparameters": json.dumps({"learning_rate": 2e-4, "epochs": 3}),
            "dataset_uri": "hf://ignored-because-the-dataset-artifact-says",
            "dataset_sha256": "ab" * 32,
            "trainjob_name": "tj-123",
            "backend": "trainer-v2",
        },
    )
    described = dataset_metadata("org/data@main", dataset_revision="r1", dataset_sha256="ab" * 32, dataset_rows=40)
    dataset = ArtifactInfo("s3://pipelines/run/dataset", "/tmp/ds", described)
    props = lineage_properties(
        model,
        RunInfo("run-uuid", "run-name", "team-a"),
        dataset=dataset,
        train_metrics={"loss": 0.5},
        eval_metrics={"acc": 0.7},
        library_versions={"kfp": "2.15.2"},
    )
    assert props["pipeline_run_id"] == "run-uuid" and props["pipeline_run_name"] == "run-name"
    assert props["pipeline_namespace"] == "team-a"
    assert props["dataset_artifact_uri"] == "s3://pipelines/run/dataset"
    assert props["dataset_uri"] == "org/data@main" and props["dataset_revision"] == "r1"
    assert props["dataset_sha256"] == "ab" * 32 and props["dataset_rows"] == 40
    # A dataset from another component (no schema): the model's metadata, as train_model copied it, tells the source.
    foreign = ArtifactInfo("s3://pipelines/run/other", "/tmp/ds", {"note": "made elsewhere"})
    from_model = lineage_properties(model, RunInfo(), dataset=foreign)
    assert from_model["dataset_uri"] == "hf://ignored-because-the-dataset-artifact-says"
    assert from_model["dataset_artifact_uri"] == "s3://pipelines/run/other" and "dataset_revision" not in from_model
    assert props["base_model"] == "ibm-granite/granite-3.1-2b" and props["algorithm"] == "lora"
    assert props["hyperparameter.learning_rate"] == 2e-4 and props["hyperparameter.epochs"] == 3
    assert props["trainjob_name"] == "tj-123" and props["training_backend"] == "trainer-v2"  # an older model's key
    assert props["train.loss"] == 0.5 and props["eval.acc"] == 0.7
    assert props["library_version.kfp"] == "2.15.2"
    assert props["model_artifact_uri"] == "s3://pipelines/run/model"


def test_lineage_rejects_bad_hyperparameters():
    with pytest.raises(ValueError, match="'hyperparameters' must be a mapping or a JSON object"):
        lineage_properties(ArtifactInfo("u", "p", {"hyperparameters": "lr=1"}), RunInfo())


def test_run_values_ignore_unresolved_placeholders_and_metrics_kfps_bookkeeping():
    assert known_run_value("{{$.pipeline_job_uuid}}") == ""
    assert known_run_value(" 1234 ") == "1234"
    metrics = ArtifactInfo("u", "p", {"display_name": "metrics", "acc": 0.5})
    assert metric_values(metrics) == {"acc": 0.5}
    assert metric_values(None) == {}


# ---- gate --------------------------------------------------------------------------------------------------------


def test_gate_prefers_eval_metrics_and_compares_inclusive():
    assert evaluate_gate("", 0.9, {}, {}).passed  # no gate without a metric
    decision = evaluate_gate("acc", 0.5, {"acc": 0.5}, {"acc": 0.1})
    assert decision.passed and decision.reasons == ("eval_metrics acc = 0.5 >= min_metric_value 0.5",)
    failed = evaluate_gate("loss", 1.0, {}, {"loss": "0.75"})
    assert failed.failures == ("train_metrics loss = 0.75 < min_metric_value 1",)


def test_gate_errors_on_unknown_or_non_numeric_metric():
    with pytest.raises(ValueError, match=r"min_metric_name='acc' is not among .*\['loss'\]"):
        evaluate_gate("acc", 0.5, {}, {"loss": 1.0})
    with pytest.raises(ValueError, match="is 'n/a', not a number"):
        evaluate_gate("acc", 0.5, {"acc": "n/a"}, {})


# ---- model_uri ---------------------------------------------------------------------------------------------------


def test_parse_s3_uri():
    assert parse_s3_uri("s3://models/team/tiny/") == ("models", "team/tiny")
    for bad, message in [
        ("s3://models", "uploading to the root"),
        ("s3://Bad_Bucket/x", "not a valid S3 bucket name"),
        ("gs://b/x", "expected s3://"),
        ("s3://models/../x", "without '..'"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_s3_uri(bad)


def test_validate_serving_uri_refuses_local_paths():
    assert validate_serving_uri("pvc://claim/models/x", "model_uri") == "pvc://claim/models/x"
    assert validate_serving_uri("oci://quay.io/org/model:1", "model_uri")
    for bad in ["/kfp-workspace/model", "file:///tmp/model", "minio://mlpipeline/x", "pvc://Bad_Claim/x"]:
        with pytest.raises(ValueError, match="model_uri="):
            validate_serving_uri(bad, "model_uri")


def test_pvc_uri_maps_mount_relative_paths():
    assert pvc_uri("/kfp-workspace/out/model", "ws-claim", "/kfp-workspace", "checkpoint_path") == (
        "pvc://ws-claim/out/model"
    )
    with pytest.raises(ValueError, match="is not inside the PVC mount path"):
        pvc_uri("/tmp/model", "ws-claim", "/kfp-workspace", "checkpoint_path")
    with pytest.raises(ValueError, match="absolute path"):
        pvc_uri("out/model", "ws-claim", "/kfp-workspace", "checkpoint_path")


def test_resolve_serving_uri_order():
    model = ArtifactInfo(
        "/local/kfp/model", "/local/kfp/model", {"checkpoint_path": "/mnt/models/run1/final", "pvc_claim": "models"}
    )
    env = {"MODEL_PVC_MOUNT_PATH": "/mnt/models"}
    assert resolve_serving_uri(model, "s3://bkt/explicit", "s3://bkt/upload", env).uri == "s3://bkt/explicit"
    assert resolve_serving_uri(model, "", "s3://bkt/upload", env).uri == "s3://bkt/upload"
    derived = resolve_serving_uri(model, "", "", env)
    assert derived.uri == "pvc://models/run1/final" and "PVC models" in derived.source
    from_env = ArtifactInfo("/local", "/local", {"checkpoint_path": "/kfp-workspace/final"})
    assert resolve_serving_uri(from_env, environ={"MODEL_PVC_CLAIM": "ws"}).uri == "pvc://ws/final"
    on_store = ArtifactInfo("/x", "/x", {"checkpoint_path": "s3://mlpipeline/v2/run/model", "pvc_claim": "ws"})
    assert resolve_serving_uri(on_store, environ={}).uri == "s3://mlpipeline/v2/run/model"
    on_s3 = ArtifactInfo("s3://mlpipeline/v2/artifacts/run/model", "/gcs/x", {"checkpoint_path": "minio://x/y"})
    assert resolve_serving_uri(on_s3, environ={}).uri == "s3://mlpipeline/v2/artifacts/run/model"


def test_resolve_serving_uri_fails_clearly_for_container_paths():
    with pytest.raises(ValueError, match="has no PVC claim"):
        resolve_serving_uri(ArtifactInfo("/tmp/m", "/tmp/m", {"checkpoint_path": "/tmp/m"}), environ={})
    with pytest.raises(ValueError, match="its metadata has no checkpoint_path"):
        resolve_serving_uri(ArtifactInfo("minio://mlpipeline/m", "/tmp/m", {}), environ={})
    minio = ArtifactInfo("minio://mlpipeline/m", "/x", {"checkpoint_path": "minio://mlpipeline/m"})
    with pytest.raises(ValueError, match="checkpoint_path='minio://mlpipeline/m' is not served storage"):
        resolve_serving_uri(minio, environ={"MODEL_PVC_CLAIM": "ws"})


def test_model_files_dir_and_upload_listing(tmp_path):
    checkpoint = tmp_path / "ckpt"
    (checkpoint / "sub").mkdir(parents=True)
    (checkpoint / "config.json").write_text("{}")
    (checkpoint / "sub" / "weights.bin").write_bytes(b"x" * 10)
    model = ArtifactInfo("u", str(tmp_path / "artifact"), {"checkpoint_path": str(checkpoint)})
    assert model_files_dir(model) == checkpoint
    assert [key for _, key in files_to_upload(checkpoint)] == ["config.json", "sub/weights.bin"]
    with pytest.raises(ValueError, match="no model files to upload"):
        model_files_dir(ArtifactInfo("u", str(tmp_path / "nope"), {}))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="is empty"):
        files_to_upload(tmp_path / "empty")


# ---- registration helpers and summary ----------------------------------------------------------------------------


def test_derived_version_name():
    now = datetime.datetime(2026, 11, 23, 14, 5, 6, tzinfo=datetime.timezone.utc)
    assert derived_version_name(RunInfo("3f2a9c1e-77aa-4b1c"), now) == "20261123-140506-3f2a9c1e"
    assert derived_version_name(RunInfo(""), now) == "20261123-140506"


def test_validate_name():
    assert validate_name("granite-2b_v1.0", "model_name") == "granite-2b_v1.0"
    for bad in ["", "-lead", "has space", "a/b"]:
        with pytest.raises(ValueError, match="model_name="):
            validate_name(bad, "model_name")


@pytest.mark.parametrize(
    ("algorithm", "base_model", "expected"),
    [
        ("osft", "Qwen/Qwen2.5-1.5B-Instruct", "osft-Qwen2.5-1.5B-Instruct"),
        ("SFT", "/mnt/models/granite 3b/", "sft-granite-3b"),
        ("lora", "oci://quay.io/org/model:1.0", "lora-model:1.0"),
        ("lora", "oci://quay.io/org/model@sha256:abc", "lora-model"),
        ("", "", "fine-tuned-model"),
        ("", "___", "fine-tuned-model"),
    ],
)
def test_default_model_name_from_the_algorithm_and_the_base_model(algorithm, base_model, expected):
    assert default_model_name(algorithm, base_model) == expected
    assert validate_name(default_model_name(algorithm, base_model), "model_name")


def test_registration_names_are_checked_only_with_an_address():
    check_registration_names("", "has space", "a/b")  # skipped: nothing is registered
    check_registration_names("https://registry", "", "")  # derived at registration
    with pytest.raises(ValueError, match="model_name='has space': must start with a letter or digit"):
        check_registration_names("https://registry", "has space", "")
    with pytest.raises(ValueError, match="model_version='a/b'"):
        check_registration_names("https://registry", "ok", "a/b")


def test_summary_escapes_and_writes_atomically(tmp_path):
    text = render_summary("registered", "ok", [("URI", "s3://b/p|q")], {"eval.acc": 0.5}, "http://r/x")
    assert "s3://b/p\\|q" in text and "| eval.acc | 0.5 |" in text and "<http://r/x>" in text
    target = tmp_path / "out" / "summary.md"
    write_text_atomically(target, text)
    assert target.read_text() == text
    assert [p.name for p in target.parent.iterdir()] == ["summary.md"]
