"""The pod command with the Training Hub releases RHOAI's runtime images carry: 0.3.0 (RHOAI 3.3), 0.6.0 (3.5), 0.9.8.

Each release runs from its own environment of the set-up (``tests/harness/training_hub_envs.py``; 0.11.2, the main
``.venv``, is ``test_training_hub_data.py``'s) with the real wheels of training-hub and of the instructlab-training
and mini-trainer versions it pins, through its real data processing up to the GPU boundary (torchrun meets no NCCL on
CPU). The pod command prints the installed versions first, passes only keywords the installed function takes (each
one a named parameter, or a key its backend reads) and says in one line what the release lacks: LoRA on 0.3.0 ends
the pod, an option (just-in-time checkpoints, MLflow) is left out with a note.

``FACTS`` is the compatibility table of the README's "Training Hub versions" section; ``test_the_facts_table_holds``
reads it back from each release.
"""

from __future__ import annotations

import ast
import json
import subprocess
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from components.data_processing.dataset_download.run import run_dataset_download
from components.training.finetuning import launch
from components.training.finetuning.pod import entrypoint, hub_compat
from components.training.finetuning.pod.run_config import RUN_CONFIG_FILE, MlflowSettings, ProgressSettings
from tests.harness.requests import dataset_download_request, training_config
from tests.harness.training_hub_envs import MAIN_VERSION, HubEnv, build_tiny_model_in, hub_env

VERSIONS = ["0.3.0", "0.6.0", "0.9.8"]
ALGORITHMS = ("sft", "osft", "lora")

#: What each release takes (the README's "Training Hub versions" table): its functions, and the options and settings
#: that differ between releases, True where every function concerned names the keyword or its backend reads it:
#: jit = enable_jit_checkpoint, mlflow = mlflow_tracking_uri, osft_eval = osft's validation_data_path, osft_max_steps =
#: osft's max_steps and training_mode, lora_eval = lora_sft's eval_data_path.
_FACT_NAMES = ("sft", "osft", "lora_sft", "jit", "mlflow", "osft_eval", "osft_max_steps", "lora_eval")
# fmt: off
FACTS: dict[str, dict[str, bool]] = {
    version: dict(zip(_FACT_NAMES, row, strict=True))
    for version, row in {
        #          sft   osft  lora_sft jit    mlflow osft_eval osft_max_steps lora_eval
        "0.3.0":  (True, True, False,   False, False, False,    True,          False),
        "0.6.0":  (True, True, True,    False, True,  False,    True,          False),
        "0.9.8":  (True, True, True,    False, True,  False,    True,          True),
        "0.11.2": (True, True, True,    True,  True,  True,     True,          True),
    }.items()
}
# fmt: on

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


def _pod_env(env: HubEnv, home: Path) -> dict[str, str]:
    return {
        "PATH": f"{env.bin_dir}:/usr/bin:/bin",  # torchrun, as in the training image
        "HOME": str(home),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "PET_NODE_RANK": "0",
        "OMP_NUM_THREADS": "1",
    }


@pytest.fixture(scope="module")
def train_file(tmp_path_factory):
    """The dataset step's train split of the demo data (one file for every release): ``(path, rows)``."""
    from pipelines.demo.demo_data import DEMO_DATASET_PATH

    root = tmp_path_factory.mktemp("versions-data")
    request = dataset_download_request(str(DEMO_DATASET_PATH), train_split_ratio=0.9, subset_count=60)
    result = run_dataset_download(request, root / "train.jsonl", root / "eval.jsonl")
    return root / "train.jsonl", result.train.rows


def _facts(env: HubEnv, home: Path) -> dict[str, list[str]]:
    """What a release takes, read in its environment: ``{function: [keywords]}`` (absent functions left out)."""
    if env.version == MAIN_VERSION:  # this process's own Training Hub
        import training_hub

        from components.training.finetuning.tests.training_hub_keywords import backend_keywords, named_parameters

        names = [name for name in ("sft", "osft", "lora_sft") if hasattr(training_hub, name)]
        return {name: sorted(named_parameters(name) | backend_keywords(name)) for name in names}
    process = subprocess.run(
        [str(env.python), "-c", _FACTS_SCRIPT, str(Path(__file__).parent)],
        env=_pod_env(env, home),
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
    settings = launch.PodSettings(
        progress=ProgressSettings(enabled=False, port=28080, termination_log=""),
        jit_checkpoint=True,
        mlflow=MlflowSettings(tracking_uri="http://127.0.0.1:9" if mlflow else "", experiment_name="", run_name=""),
    )
    return json.loads(launch.write_run_config(config, run_dir, train, train, None, 1, settings).read_text())


def _run_pod(env: HubEnv, run_dir: Path) -> subprocess.CompletedProcess:
    """The staged pod command, run with the release's Python as the runtime image would."""
    return subprocess.run(
        [str(env.python), str(run_dir / "entrypoint.py"), "--config", str(run_dir / RUN_CONFIG_FILE)],
        env=_pod_env(env, run_dir),
        capture_output=True,
        text=True,
        timeout=420,
    )


class _Runs:
    """Each release's facts and pod runs, all started on the first request for that release, two at a time.

    The pod commands spend much of their time in single-threaded imports and in torchrun's waits: two processes at a
    time keep both CI cores busy, so a release's four processes take about the time of two.
    """

    def __init__(self, root: Path, train: Path, shared_model: Path):
        self.root, self.train, self.shared_model = root, train, shared_model
        self.pool = ThreadPoolExecutor(max_workers=2)
        self.started: dict[str, dict[str, Future]] = {}
        self.configs: dict[tuple[str, str], dict] = {}

    def _start(self, env: HubEnv) -> dict[str, Future]:
        futures = {"facts": self.pool.submit(_facts, env, self.root)}
        if env.version == MAIN_VERSION:
            return futures  # its pod runs are test_training_hub_data.py's
        model = self.shared_model
        if env.own_transformers:
            model = build_tiny_model_in(env, self.root / f"model-{env.version}")
        for algorithm in ALGORITHMS:
            run_dir = self.root / env.version / algorithm
            mlflow = not FACTS[env.version]["mlflow"]  # asked for where the release lacks it: a note, not an error
            self.configs[env.version, algorithm] = _stage(run_dir, algorithm, model, self.train, mlflow)
            futures[algorithm] = self.pool.submit(_run_pod, env, run_dir)
        return futures

    def facts(self, env: HubEnv) -> dict[str, list[str]]:
        """What ``env``'s release takes (see :func:`_facts`)."""
        if env.version not in self.started:
            self.started[env.version] = self._start(env)
        return self.started[env.version]["facts"].result()

    def pod(self, env: HubEnv, algorithm: str) -> tuple[dict, subprocess.CompletedProcess]:
        """The run config and the finished pod command of ``algorithm`` on ``env``'s release."""
        if env.version not in self.started:
            self.started[env.version] = self._start(env)
        return self.configs[env.version, algorithm], self.started[env.version][algorithm].result()


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_model_dir, train_file):
    """The module's runner (:class:`_Runs`)."""
    runner = _Runs(tmp_path_factory.mktemp("versions"), train_file[0], tiny_model_dir)
    yield runner
    runner.pool.shutdown(wait=True, cancel_futures=True)


def _called_keywords(stdout: str, function_name: str) -> set[str]:
    """The keywords of the ``training-hub <function>(k=v, ...)`` line the pod printed before the call."""
    line = next(line for line in stdout.splitlines() if line.startswith(f"training-hub {function_name}("))
    call = ast.parse(line.removeprefix("training-hub "), mode="eval").body
    assert isinstance(call, ast.Call)
    return {keyword.arg for keyword in call.keywords if keyword.arg}


def _keyword_facts(taken: dict[str, list[str]]) -> dict[str, bool]:
    def takes(function: str, keyword: str) -> bool:
        return keyword in taken.get(function, ())

    functions = [name for name in ("sft", "osft", "lora_sft") if name in taken]
    return {
        "sft": "sft" in taken,
        "osft": "osft" in taken,
        "lora_sft": "lora_sft" in taken,
        "jit": all(takes(name, "enable_jit_checkpoint") for name in functions),
        "mlflow": all(takes(name, "mlflow_tracking_uri") for name in functions),
        "osft_eval": takes("osft", "validation_data_path"),
        "osft_max_steps": takes("osft", "max_steps") and takes("osft", "training_mode"),
        "lora_eval": takes("lora_sft", "eval_data_path"),
    }


@pytest.mark.slow
@pytest.mark.parametrize("version", [*VERSIONS, MAIN_VERSION])
def test_the_facts_table_holds(version, runs):
    assert _keyword_facts(runs.facts(hub_env(version))) == FACTS[version]


@pytest.mark.slow
@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_the_pod_command_reaches_the_gpu_or_says_in_one_line_what_the_release_lacks(
    version, algorithm, train_file, runs
):
    env = hub_env(version)
    rows = train_file[1]
    function_name = entrypoint.TRAINING_HUB_FUNCTIONS[algorithm]
    run_config, process = runs.pod(env, algorithm)
    output = process.stdout[-3000:] + process.stderr[-5000:]
    assert process.stdout.splitlines()[0].startswith(f"training-hub {version} (instructlab-training "), output
    assert process.returncode == 1, output
    last = [line for line in process.stderr.splitlines() if line.strip()][-1]
    if not FACTS[version][function_name]:
        assert last == "entrypoint: " + hub_compat.missing_function_message(version, function_name), output
        assert "Traceback" not in process.stderr and not Path(run_config["ckpt_output_dir"]).exists()
        assert f"training-hub {version} in this runtime's image has no lora_sft" in last
        assert "training_backend='transformers'" in last
        return
    assert last == entrypoint.no_gpu_message(algorithm), output
    called = _called_keywords(process.stdout, function_name)
    assert called <= set(runs.facts(env)[function_name])  # every keyword is one the release takes
    notes = [line for line in process.stdout.splitlines() if line.startswith("note: ")]
    if not FACTS[version]["jit"]:  # asked for (jit_checkpoint=True), left out with one note naming the version
        assert "enable_jit_checkpoint" not in called
        assert any(f"training-hub {version} {function_name} does not take enable_jit_checkpoint" in n for n in notes)
    if not FACTS[version]["mlflow"]:
        assert not called & {"mlflow_tracking_uri", "mlflow_experiment_name", "mlflow_run_name"}
        assert any("running without MLflow tracking" in note for note in notes)
    validation = {"osft": ("osft_eval", "validation_data_path"), "lora": ("lora_eval", "eval_data_path")}
    if algorithm in validation:  # in-training validation on the eval split: passed where taken, else one note
        fact, keyword = validation[algorithm]
        assert (keyword in called) == FACTS[version][fact]
        assert any("running without validation on the eval split" in n for n in notes) != FACTS[version][fact]
    if algorithm != "lora":  # every row was processed in the pod by the release's own backend before the GPU boundary
        processed = Path(run_config["ckpt_output_dir"]) / "_data" / "data.jsonl"
        assert len(processed.read_text().splitlines()) == rows
