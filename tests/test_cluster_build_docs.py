"""The README's way to a first cluster run works as written: its commands name real flags, files and build arguments,
and the images they build are the ones the compile commands put on every task (what needs a cluster is not run)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from pipelines.cli import build_parser
from pipelines.training.finetuning.settings import STEPS, CompileSettings

REPO_ROOT = Path(__file__).resolve().parents[1]
SECTION_TITLE = "## Run on a cluster: the step images"


def _section() -> str:
    text = (REPO_ROOT / "README.md").read_text()
    start = text.index(SECTION_TITLE)
    return text[start : text.index("\n## ", start + len(SECTION_TITLE))]


def _commands() -> list[list[str]]:
    """Every shell command of the section's code blocks, continuation lines joined, split as the shell would."""
    blocks = re.findall(r"```bash\n(.*?)```", _section(), flags=re.S)
    commands = []
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            for part in line.split(" && "):
                if part.strip():
                    commands.append(shlex.split(part))
    return commands


def _settings_of(words: list[str]) -> CompileSettings:
    """The settings a ``kfp-finetune compile`` command line compiles with (the CLI's parser; its variables expanded)."""
    expanded = [word.replace("$REGISTRY", "registry.example.com/my-team") for word in words]
    args = build_parser(dataset_options=False).parse_args(expanded[1:])
    fields = {name: value for name, value in vars(args).items() if name in CompileSettings.__dataclass_fields__}
    return CompileSettings(**{name: value for name, value in fields.items() if value is not None})


def test_the_section_says_what_to_do_before_the_first_run_and_after_a_release_in_that_order():
    section = _section()
    before = section.index("**Before the first run, while no release is published**")
    in_cluster = section.index("*In the cluster, no registry account (OpenShift):*")
    podman = section.index("*With podman")
    after = section.index("**After a release is published**")
    assert before < in_cluster < podman < after
    assert "nothing." in section[after : after + 300]
    assert ".github/workflows/release.yml" in section and (REPO_ROOT / ".github/workflows/release.yml").is_file()


def test_the_openshift_binary_build_lands_in_the_namespaces_imagestream_and_every_step_runs_on_it():
    commands = _commands()
    [namespace] = [c[2] for c in commands if c[:2] == ["oc", "project"]]
    builds = {c[c.index("--name") + 1]: c for c in commands if c[:2] == ["oc", "new-build"]}
    assert set(builds) == {"kfp-finetune", "kfp-finetune-cuda"}
    for name, command in builds.items():
        assert "--binary" in command and "--strategy=docker" in command, command
        [patch] = [c for c in commands if c[:3] == ["oc", "patch", f"bc/{name}"]]
        strategy = json.loads(patch[patch.index("-p") + 1])["spec"]["strategy"]["dockerStrategy"]
        assert (REPO_ROOT / strategy["dockerfilePath"]).is_file() and strategy["dockerfilePath"] == "Containerfile"
        declared = set(re.findall(r"^ARG (\w+)", (REPO_ROOT / "Containerfile").read_text(), flags=re.M))
        assert {arg["name"] for arg in strategy.get("buildArgs", [])} <= declared
        assert ["oc", "start-build", name, "--from-dir", ".", "--follow"] in commands
    stream = f"image-registry.openshift-image-registry.svc:5000/{namespace}"
    compiles = [c for c in commands if c[:2] == ["kfp-finetune", "compile"]]
    cpu, cuda = [_settings_of(c) for c in compiles if stream in " ".join(c)]
    assert {cpu.image_of(step) for step in STEPS} == {f"{stream}/kfp-finetune:latest"}  # --eval-gpus 0: CPU image
    assert cpu.eval_gpus == 0
    assert [cuda.image_of(step) for step in STEPS] == [f"{stream}/kfp-finetune:latest"] * 2 + [
        f"{stream}/kfp-finetune-cuda:latest",
        f"{stream}/kfp-finetune:latest",
    ]


def test_the_podman_path_builds_and_pushes_the_two_images_it_compiles_with():
    commands = _commands()
    builds = [c for c in commands if c[:2] == ["podman", "build"]]
    pushed = {c[2] for c in commands if c[:2] == ["podman", "push"]}
    tags = {c[c.index("-t") + 1] for c in builds}
    assert all(c[c.index("-f") + 1] == "Containerfile" for c in builds) and tags == pushed
    declared = set(re.findall(r"^ARG (\w+)", (REPO_ROOT / "Containerfile").read_text(), flags=re.M))
    for command in builds:
        arguments = [command[i + 1].split("=")[0] for i, word in enumerate(command) if word == "--build-arg"]
        assert set(arguments) <= declared, command
    [compile_] = [c for c in commands if c[:2] == ["kfp-finetune", "compile"] and "$REGISTRY" in " ".join(c)]
    settings = _settings_of(compile_)
    expanded = {tag.replace("$REGISTRY", "registry.example.com/my-team") for tag in tags}
    assert {settings.image_of(step) for step in STEPS} == expanded


def test_the_guides_compile_reads_the_variables_the_section_names():
    section = _section()
    for variable in re.findall(r"KFP_FINETUNE_[A-Z_]+", section):
        field = variable.removeprefix("KFP_FINETUNE_").lower()
        assert field in CompileSettings.__dataclass_fields__, variable
        value = "registry.example.com/x:1"
        assert getattr(CompileSettings.from_env({variable: value}), field) == value
    assert "python\npipelines/training/osft_minimal/pipeline.py" in section or (
        "python pipelines/training/osft_minimal/pipeline.py" in section
    )
    assert (REPO_ROOT / "pipelines/training/osft_minimal/pipeline.py").is_file()


def test_every_compile_command_of_the_section_parses_with_the_clis_own_flags():
    """An unknown or misspelt flag makes argparse exit: each command is parsed as the CLI parses it."""
    compiles = [c for c in _commands() if c[:2] == ["kfp-finetune", "compile"]]
    assert len(compiles) == 3
    for command in compiles:
        assert "--all" in command and _settings_of(command).image
