"""The real Training Hub releases' pod commands, run once per session in the background, two at most at a time.

``test_training_hub_data.py`` (0.11.2) and ``test_training_hub_versions.py`` (0.3.0, 0.6.0, 0.9.8) ask for the same
runs: the demo train split staged with an eval split and JIT checkpoints on, the pod command run with the release's
Python up to the GPU boundary; and what each release takes, read in its own environment. They start with the first
test of this folder where the session will run a Training Hub test (``conftest.py``).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from components.data_processing.dataset_download.run import run_dataset_download
from components.training.finetuning.contract import RUN_CONFIG_FILE, MlflowSettings
from components.training.finetuning.run import write_run_config
from tests.harness.requests import dataset_download_request, pod_settings, training_config
from tests.harness.training_hub_envs import MAIN_VERSION, HubEnv, build_tiny_model_in, hub_env

ALGORITHMS = ("sft", "osft", "lora")
#: The test files that ask for these runs (the runs start early only where the session will run one of them).
HUB_TEST_FILES = frozenset({"test_training_hub_data.py", "test_training_hub_versions.py"})

#: Reads, inside a release's environment, which functions it has and which keywords each takes (JSON on stdout).
_FACTS_SCRIPT = """
import json, sys
import training_hub
sys.path.insert(0, sys.argv[1])  # training_hub_keywords.py, by itself: the project's packages need kfp
from training_hub_keywords import backend_keywords, named_parameters
facts = {}
for name in ("sft", "osft", "lora_sft"):
    if hasattr(training_hub, name):
        facts[name] = sorted(named_parameters(name) | backend_keywords(name))
print(json.dumps(facts))
"""


def write_train_split(root: Path) -> tuple[Path, int]:
    """The dataset step's train split of 60 demo rows (90 %) under ``root``: ``(path, rows)``."""
    from pipelines.demo.demo_data import DEMO_DATASET_PATH

    request = dataset_download_request(str(DEMO_DATASET_PATH), train_split_ratio=0.9, subset_count=60)
    result = run_dataset_download(request, root / "train.jsonl", root / "eval.jsonl")
    return root / "train.jsonl", result.train.rows


def pod_env(env: HubEnv, home: Path) -> dict[str, str]:
    """The pod's environment: the release's ``torchrun`` first on ``PATH`` (as in the image), offline, no GPU."""
    return {
        "PATH": f"{env.bin_dir}:/usr/bin:/bin",
        "HOME": str(home),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "PET_NODE_RANK": "0",
        "OMP_NUM_THREADS": "1",
    }


def _facts(env: HubEnv, home: Path) -> dict[str, list[str]]:
    """What a release takes, read in its environment: ``{function: [keywords]}`` (absent functions left out)."""
    if env.version == MAIN_VERSION:  # this process's own Training Hub
        import training_hub

        from components.training.finetuning.tests.training_hub_keywords import backend_keywords, named_parameters

        names = [name for name in ("sft", "osft", "lora_sft") if hasattr(training_hub, name)]
        return {name: sorted(named_parameters(name) | backend_keywords(name)) for name in names}
    process = subprocess.run(
        [str(env.python), "-c", _FACTS_SCRIPT, str(Path(__file__).parent)],
        env=pod_env(env, home),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == 0, process.stderr[-3000:]
    return json.loads(process.stdout.splitlines()[-1])


def _stage(run_dir: Path, algorithm: str, model: Path, train: Path, mlflow: bool) -> dict:
    """Stages a run as ``train_model`` does (with an eval split and JIT checkpoints on); returns its run config."""
    run_dir.mkdir(parents=True)
    config = training_config(
        base_model=str(model), algorithm=algorithm, effective_batch_size=8, num_epochs=1, max_seq_len=512,
        max_tokens_per_gpu=1024,
    )  # fmt: skip
    settings = pod_settings(
        mlflow=MlflowSettings(tracking_uri="http://127.0.0.1:9" if mlflow else "", experiment_name="", run_name="")
    )
    return json.loads(write_run_config(config, run_dir, train, train, None, 1, settings).read_text())


def run_pod(env: HubEnv, run_dir: Path) -> subprocess.CompletedProcess:
    """The staged pod command, run with the release's Python as the runtime image would."""
    return subprocess.run(
        [str(env.python), str(run_dir / "entrypoint.py"), "--config", str(run_dir / RUN_CONFIG_FILE)],
        env=pod_env(env, run_dir),
        capture_output=True,
        text=True,
        timeout=420,
    )


class _Gate:
    """How many runs may go at once: one while the tests go on, two while a test waits for a result."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._running = 0
        self._waiting = 0

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        with self._condition:
            self._condition.wait_for(lambda: self._running < (2 if self._waiting else 1))
            self._running += 1
        try:
            yield
        finally:
            with self._condition:
                self._running -= 1
                self._condition.notify_all()

    def result(self, future: Future):
        """``future``'s result, with both cores lent to the runs meanwhile."""
        with self._condition:
            self._waiting += 1
            self._condition.notify_all()
        try:
            return future.result()
        finally:
            with self._condition:
                self._waiting -= 1


class HubRuns:
    """Each release's facts and pod runs (``ALGORITHMS``), started once, in the order the tests ask for them.

    ``shared_model`` is the tiny model (a release with its own transformers builds its own); ``mlflow_asked``: per
    release, whether its runs ask for MLflow.
    """

    def __init__(self, root: Path, train: Path, shared_model: Path, mlflow_asked: dict[str, bool]):
        self.root, self.train, self.shared_model, self.mlflow_asked = root, train, shared_model, mlflow_asked
        self.pool = ThreadPoolExecutor(max_workers=2)
        self.gate = _Gate()
        self.started: dict[str, dict[str, Future]] = {}
        self._lock = threading.Lock()
        self._model_lock = threading.Lock()
        self._models: dict[str, Path] = {}

    def start(self, versions: list[str]) -> None:
        """Queues the pod runs and facts of ``versions`` not queued yet (0.11.2's facts are read when asked)."""
        with self._lock:
            for version in versions:
                if version not in self.started:
                    self.started[version] = self._queue(hub_env(version))

    def _queue(self, env: HubEnv) -> dict[str, Future]:
        futures = {algorithm: self.pool.submit(self._pod_job, env, algorithm) for algorithm in ALGORITHMS}
        if env.version == MAIN_VERSION:  # read in this process, when asked: not in a thread beside the other tests
            futures["facts"] = Future()
        else:
            futures["facts"] = self.pool.submit(self._facts_job, env)
        return futures

    def _model(self, env: HubEnv) -> Path:
        if not env.own_transformers:
            return self.shared_model
        with self._model_lock:  # built once per release, by the first of its runs
            if env.version not in self._models:
                with self.gate.slot():
                    self._models[env.version] = build_tiny_model_in(env, self.root / f"model-{env.version}")
            return self._models[env.version]

    def _facts_job(self, env: HubEnv) -> dict[str, list[str]]:
        with self.gate.slot():
            return _facts(env, self.root)

    def _pod_job(self, env: HubEnv, algorithm: str) -> tuple[dict, subprocess.CompletedProcess]:
        run_dir = self.root / env.version / algorithm
        config = _stage(run_dir, algorithm, self._model(env), self.train, self.mlflow_asked[env.version])
        with self.gate.slot():
            return config, run_pod(env, run_dir)

    def facts(self, version: str) -> dict[str, list[str]]:
        """What ``version``'s release takes (see :func:`_facts`)."""
        self.start([version])
        future = self.started[version]["facts"]
        if version == MAIN_VERSION and not future.done():
            future.set_result(_facts(hub_env(version), self.root))
        return self.gate.result(future)

    def pod(self, version: str, algorithm: str) -> tuple[dict, subprocess.CompletedProcess]:
        """The run config and the finished pod command of ``algorithm`` on ``version``'s release."""
        self.start([version])
        return self.gate.result(self.started[version][algorithm])

    def close(self) -> None:
        """Drops the runs not started yet and waits for the running ones."""
        self.pool.shutdown(wait=True, cancel_futures=True)
