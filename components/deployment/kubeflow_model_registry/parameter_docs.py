"""Descriptions of the ``model_registry`` parameters: the component docstring, the dashboard and the README."""

PARAMETER_DOCS = {
    "model": (
        "The trained model: `train_model`'s manifest of weights on the workspace (read in place, checked) or the "
        "files themselves. Its metadata feeds the lineage and the URI (see below)."
    ),
    "registry_address": (
        'Registry REST host or URL (`https://model-registry-rest.apps…`). `""` skips the step (status `skipped`).'
    ),
    "registry_port": "Port when the address has none.",
    "model_name": (
        "Registered model name; `\"\"`: `<algorithm>-<base model's last path part>` from the model's metadata "
        "(e.g. `osft-Qwen2.5-1.5B-Instruct`). Letters, digits, `. _ : + -`."
    ),
    "model_version": (
        'Version name. `""`: the version this run registered before (matched on `pipeline_run_id`), else '
        "`<UTC yyyymmdd-HHMMSS>-<first 8 chars of the run id>`."
    ),
    "author": "Author of the version (and owner of a newly created registered model).",
    "description": "Description of the version (and of a newly created registered model).",
    "model_format_name": "Model format serving runtimes select on (e.g. `vLLM`, `pytorch`).",
    "model_format_version": "Version of that format.",
    "eval_metrics": "Recorded as `eval.<name>`; searched first by the gate.",
    "train_metrics": "Recorded as `train.<name>`; searched second by the gate.",
    "dataset": (
        "Training dataset: its URI and metadata (`dataset_uri`, `dataset_revision`, `dataset_sha256`, `dataset_rows`) "
        "become lineage."
    ),
    "min_metric_name": (
        'Gate metric (`""` = no gate). A name found in neither metrics artifact is an error, not a silent skip.'
    ),
    "min_metric_value": "Register only when the metric is `>=` this.",
    "eval_results": (
        "`lm_eval`'s `results` output: with the base model's `baseline_results`, its `comparison` feeds the "
        "improvement and regression gates, the summary table and the `eval.<task>/<metric>/base`, `/delta` properties."
    ),
    "min_improvement_metric": (
        'The new task\'s metric that must improve over the base model, e.g. `heldout_generation/chrf` (`""` = no '
        "improvement gate). A name that was not compared is an error, not a silent skip."
    ),
    "min_improvement": (
        "Least improvement of `min_improvement_metric` over the base model, in the metric's units and direction "
        "(a perplexity improves by going down). `0` = must not get worse."
    ),
    "max_regression": (
        "Most any metric of every other task (all but `lm_eval`'s held-out tasks and the improvement metric's task) "
        "may get worse than the base model's; negative (default) = no regression gate. E.g. `0.02` = 2 accuracy "
        "points, or 2 % with `max_regression_relative`."
    ),
    "max_regression_relative": "`max_regression` is a fraction of the base model's value instead of metric units.",
    "model_uri": (
        "Explicit serving URI (`pvc://claim/path`, `s3://…`, `oci://…`, `gs://`, `hf://`, `http(s)://`), "
        "overriding the derived one. A `pvc://` of the run's own workspace claim (`…-kfp-workspace`, deleted with "
        "the run) is refused: use `modelcar_uri` or `s3_upload_prefix`."
    ),
    "s3_upload_prefix": (
        "`s3://bucket/prefix`: upload the model files there (data-connection env credentials; one streamed copy "
        "from the workspace) and register that URI. Exclusive with `model_uri`."
    ),
    "is_secure": (
        "Verify the registry's TLS certificate (needs `https://` and a token). `False` for an in-cluster "
        "plain-HTTP service."
    ),
    "ca_bundle_path": "PEM CA bundle mounted in the pod (e.g. from a ConfigMap) to verify the registry with.",
    "allow_token_over_http": (
        "Send the bearer token to a plain http:// registry address (default False: the token is withheld with a "
        "warning, since plain HTTP exposes it; only for a trusted in-cluster network or service mesh)."
    ),
    "storage_key": "Data-connection secret name recorded on the artifact, for serving to read an `s3://` URI.",
    "pipeline_run_id": (
        "The run's id (lineage, derived version names, re-run matching). Pipelines may pass the "
        "placeholder explicitly; an unresolved placeholder counts as unknown."
    ),
    "pipeline_run_name": "The run's name (lineage).",
    "summary": "What was registered (README: *Outputs*), or why the step skipped or the model was gated out.",
    "modelcar_uri": (
        "Push the model as an OCI modelcar (files under `/models`, one layer each, on `modelcar_base_image`) to "
        '`oci://registry/repository[:tag]` and register it pinned, `oci://…@sha256:…` (`""` = no modelcar). '
        "The push secret is a Docker `config.json` in the optional secret `oci-push-secret-model-upload` (key "
        "`OCI_PUSH_SECRET_MODEL_UPLOAD`, or `.dockerconfigjson`). Published even without `registry_address`."
    ),
    "modelcar_base_image": "The image the model files are layered on (`registry/repository:tag`, no scheme).",
    "modelcar_lora_weights": (
        "LoRA models only: `as_trained` (what training saved), `merged` (the adapter merged into its base model "
        "here) or `adapter` (the adapter alone; its base model is recorded as `modelcar_base_model`)."
    ),
    "modelcar_insecure": "Plain HTTP or unverified TLS to the OCI registries (in-cluster or test registries only).",
    "deploy_inference_service": (
        "After a registration that was not gated out, serve the registered `oci://` (or `s3://`) model with a "
        "KServe InferenceService (vLLM), wait until Ready and send one completion as a smoke test. Never changes a "
        "service this step did not create for the same registered model. RBAC: `rbac.yaml`."
    ),
    "deploy_service_name": 'The InferenceService\'s name (`""` = from `model_name`).',
    "deploy_namespace": 'Its namespace (`""` = the pipeline\'s).',
    "deploy_runtime": "The ServingRuntime to serve with; created from the vLLM template when it does not exist.",
    "deploy_runtime_image": "The vLLM image of a ServingRuntime this step creates.",
    "deploy_gpus": "`nvidia.com/gpu` of the predictor.",
    "deploy_timeout_seconds": "How long to wait for the InferenceService to become Ready.",
    "deploy_hardware_profile": (
        "A RHOAI Hardware Profile's name, read at deploy time: its resources, node selector, tolerations and "
        "Kueue queue go into the predictor (replacing `deploy_gpus`). '' = none."
    ),
    "pvc_path": (
        "The run's workspace: pass `dsl.WORKSPACE_PATH_PLACEHOLDER` (the pipelines do). `train_model`'s weights are "
        "read there in place, the S3 upload streams from there and the modelcar's layout is built there; the "
        'workspace itself is never registered (it is deleted when the run succeeds). "" = none.'
    ),
}
