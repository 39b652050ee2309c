"""``training_launcher="auto"`` against kmock's Kubernetes API: each combination of served resources and runtimes."""

import pytest

from components.training.finetuning.cluster.launchers import LauncherSelectionError, select_launcher
from tests.harness.follow_doubles import Log

NS = "team-a"
TRAINJOBS = "trainer.kubeflow.org/v1alpha1/trainjobs"
PYTORCHJOBS = "kubeflow.org/v1/pytorchjobs"


def _select(kube_api, runtime_name="training-hub", runtime_kind="ClusterTrainingRuntime"):
    log = Log()
    launcher = select_launcher(kube_api.api_client, runtime_name, runtime_kind, NS, log=log, sleep=lambda s: None)
    return launcher, log


def test_trainer_with_the_runtime_wins_even_when_pytorchjobs_are_served(kube_api):
    kube_api.create_runtime("training-hub")
    kube_api.serve(PYTORCHJOBS)
    launcher, log = _select(kube_api)
    assert launcher == "trainjob"
    assert log == [
        "training_launcher=auto: trainjobs.trainer.kubeflow.org/v1alpha1 is served and "
        "ClusterTrainingRuntime 'training-hub' exists"
    ]
    # Discovery plus one runtime read; nothing is listed or created.
    assert [(r.method, r.path) for r in kube_api.requests] == [
        ("GET", "/apis/trainer.kubeflow.org/v1alpha1"),
        ("GET", "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes/training-hub"),
    ]


def test_namespaced_runtime_is_looked_up_in_the_namespace(kube_api):
    kube_api.create_runtime("team-runtime", kind="TrainingRuntime", namespace=NS)
    assert _select(kube_api, "team-runtime", "TrainingRuntime")[0] == "trainjob"
    kube_api.create_runtime("elsewhere", kind="TrainingRuntime", namespace="team-b")
    kube_api.serve(PYTORCHJOBS)
    launcher, log = _select(kube_api, "elsewhere", "TrainingRuntime")
    assert launcher == "pytorchjob"
    assert "TrainingRuntime 'elsewhere' is missing (available: team-runtime)" in log[0]


def test_missing_runtime_falls_back_to_pytorchjob_and_says_why(kube_api):
    kube_api.create_runtime("other-runtime")
    kube_api.serve(PYTORCHJOBS)
    launcher, log = _select(kube_api)
    assert launcher == "pytorchjob"
    assert log == [
        "training_launcher=auto: using pytorchjobs.kubeflow.org/v1 (Training Operator v1) because "
        "trainjobs.trainer.kubeflow.org/v1alpha1: served, but ClusterTrainingRuntime 'training-hub' is missing "
        "(available: other-runtime)"
    ]


def test_training_operator_only_cluster_picks_pytorchjob(kube_api):
    kube_api.unserve(TRAINJOBS)
    kube_api.serve(PYTORCHJOBS)
    launcher, log = _select(kube_api)
    assert launcher == "pytorchjob"
    assert "trainjobs.trainer.kubeflow.org/v1alpha1: not served" in log[0]
    # The runtime is not even looked up when trainjobs are not served.
    assert not any("runtimes" in line for line in kube_api.requests_summary())


def test_neither_launcher_fails_listing_what_was_found(kube_api):
    kube_api.create_runtime("other-runtime")
    kube_api.unserve(PYTORCHJOBS)  # the harness declares it; this cluster has no Training Operator
    with pytest.raises(LauncherSelectionError) as error:
        _select(kube_api)
    message = str(error.value)
    assert "trainjobs.trainer.kubeflow.org/v1alpha1: served, but ClusterTrainingRuntime 'training-hub' is missing" in (
        message
    )
    assert "(available: other-runtime)" in message
    assert "pytorchjobs.kubeflow.org/v1: not served (group versions served: none)" in message
    assert "training_launcher='local'" in message


def test_empty_cluster_fails_naming_both_resources(kube_api):
    kube_api.unserve(TRAINJOBS)
    kube_api.unserve(PYTORCHJOBS)  # the harness declares it; this cluster has no Training Operator
    with pytest.raises(LauncherSelectionError, match=r"trainjobs.*not served.*pytorchjobs.*not served"):
        _select(kube_api)


def test_only_the_builders_version_counts(kube_api):
    """A cluster serving only another PyTorchJob version cannot take the v1 manifest the builder writes."""
    kube_api.unserve(TRAINJOBS)
    kube_api.serve("kubeflow.org/v2/pytorchjobs")
    kube_api.unserve(PYTORCHJOBS)  # the harness declares it; this cluster has no Training Operator
    with pytest.raises(LauncherSelectionError, match=r"pytorchjobs.kubeflow.org/v1: not served \(group versions .*v2"):
        _select(kube_api)


def test_unreadable_runtime_is_assumed_present_and_other_errors_are_clear(kube_api):
    kube_api.fail("fetch", "clustertrainingruntimes", status=403)
    launcher, log = _select(kube_api)
    assert launcher == "trainjob" and "cannot be read (forbidden)" in log[0]
    kube_api.fail("fetch", "clustertrainingruntimes", status=401)
    with pytest.raises(LauncherSelectionError, match=r"reading ClusterTrainingRuntime 'training-hub'.*HTTP 401"):
        _select(kube_api)
    with pytest.raises(ValueError, match="runtime_kind='PyTorchJob'"):
        _select(kube_api, runtime_kind="PyTorchJob")


def test_transient_discovery_errors_are_retried(kube_api):
    kube_api.create_runtime("training-hub")
    kube_api.fail("fetch", "clustertrainingruntimes", status=503, times=2)
    launcher, log = _select(kube_api)
    assert launcher == "trainjob"
    assert sum("retry" in line for line in log) == 2
