"""Publishes the model as an OCI modelcar with ``model_registry.utils.save_to_oci_registry`` and a skopeo backend."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from components._common.oci_reference import OciReference, docker_config_from_env, parse_oci_uri

from .request import ModelcarOptions

#: The push secret (a Docker config.json) as an env var: the key the guide's form uses, then ``.dockerconfigjson``.
PUSH_SECRET_ENV = "OCI_PUSH_SECRET_MODEL_UPLOAD"
PUSH_DOCKERCONFIGJSON_ENV = "OCI_PUSH_SECRET_DOCKERCONFIGJSON"
#: The Kubernetes secret mounted as those variables (optional).
PUSH_SECRET_NAME = "oci-push-secret-model-upload"
#: ``modelcar_lora_weights`` values.
LORA_WEIGHTS = ("as_trained", "merged", "adapter")
#: Deadline of one skopeo copy (the base image pull, the push), in seconds.
COPY_TIMEOUT_SECONDS = 1800
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


class ModelcarError(ValueError):
    """The modelcar cannot be published; the one-line message says what and what to fix (never a secret)."""


@dataclasses.dataclass(frozen=True)
class PublishedModelcar:
    """A pushed modelcar: ``uri`` pinned by digest (registered and served), the ``tag_uri`` it was pushed under.

    ``lora_weights``: ``merged``, ``adapter`` or ""; ``base_model``: the adapter's ("" unless adapter).
    """

    uri: str
    tag_uri: str
    digest: str
    lora_weights: str
    base_model: str

    def properties(self) -> dict[str, str]:
        """The modelcar's facts as version properties (``modelcar_*``)."""
        properties = {"modelcar_uri": self.uri, "modelcar_tag": self.tag_uri, "modelcar_digest": self.digest}
        if self.lora_weights:
            properties["modelcar_lora_weights"] = self.lora_weights
        if self.base_model:
            properties["modelcar_base_model"] = self.base_model
        return properties


def parse_modelcar_uri(uri: str, parameter: str = "modelcar_uri") -> OciReference:
    """Parses the push target ``oci://<registry>[:port]/<repository>[:<tag>]`` (tag ``latest`` when none).

    Raises:
        ModelcarError: Not such a reference (a ``@sha256:`` digest cannot be pushed to: the push makes it).
    """
    target = parse_oci_uri(uri.strip(), parameter, ModelcarError, "oci://quay.io/org/my-model:v1")
    if target.digest:
        raise ModelcarError(f"{parameter}={uri!r}: a push target has no @digest (the push decides it); drop it")
    return target


def check_modelcar_options(options: ModelcarOptions) -> None:
    """Checks the push target and the LoRA choice before anything is pushed or registered.

    Raises:
        ModelcarError: One line naming the parameter, its value and the rule.
    """
    if options.uri.strip():
        parse_modelcar_uri(options.uri)
    if options.lora_weights not in LORA_WEIGHTS:
        raise ModelcarError(
            f"modelcar_lora_weights={options.lora_weights!r}: expected one of {', '.join(LORA_WEIGHTS)}"
        )


def lora_files(model_dir: Path, metadata: Mapping[str, Any], lora_weights: str) -> tuple[str, str]:
    """What a LoRA model is published as: ``("merged", "")`` or ``("adapter", <its base model>)``; else ``("", "")``.

    Raises:
        ModelcarError: An adapter asked of a model that was saved merged.
    """
    if metadata.get("algorithm") != "lora":
        return "", ""
    adapter_config = model_dir / "adapter_config.json"
    saved = "adapter" if adapter_config.is_file() else "merged"
    wanted = saved if lora_weights == "as_trained" else lora_weights
    if wanted == "adapter" and saved == "merged":
        raise ModelcarError(
            f"modelcar_lora_weights='adapter': the model in {model_dir} was saved with the LoRA weights merged (no "
            "adapter_config.json); publish it 'merged' (or 'as_trained')"
        )
    base = ""
    if wanted == "adapter":
        base = str(json.loads(adapter_config.read_text()).get("base_model_name_or_path") or "")
    return wanted, base


def _skopeo(arguments: list[str], what: str, timeout: float, command: str = "copy") -> bytes:
    """Runs ``skopeo <command> <arguments>`` within ``timeout``; its standard output (ModelcarError naming ``what``)."""
    line = ["skopeo", "--command-timeout", f"{int(timeout)}s", command, "--retry-times", "2", *arguments]
    try:
        completed = subprocess.run(line, capture_output=True, timeout=timeout + 30, check=False)
    except subprocess.TimeoutExpired:
        raise ModelcarError(f"{what}: skopeo did not finish within {int(timeout)} s") from None
    if completed.returncode != 0:
        output = completed.stderr or completed.stdout
        reason = output.decode("utf-8", "replace").strip().splitlines()
        raise ModelcarError(f"{what}: skopeo failed (exit {completed.returncode}): {reason[-1] if reason else ''}")
    return completed.stdout


def verify_served_digest(oci_ref: str, digest: str, auth: list[str], tls: str, timeout: float) -> None:
    """Checks that the registry serves the manifest ``digest`` under ``oci_ref``'s repository, byte for byte.

    Raises:
        ModelcarError: The registry does not serve it, or serves other bytes under it.
    """
    repository = oci_ref.rsplit(":", 1)[0] if ":" in oci_ref.rsplit("/", 1)[-1] else oci_ref
    what = f"the pushed modelcar {oci_ref} reported as {digest}"
    if not _DIGEST.match(digest):
        raise ModelcarError(f"pushed {oci_ref} but skopeo reported no sha256 digest ({digest!r})")
    try:
        raw = _skopeo(
            [*auth, f"--tls-verify={tls}", "--raw", f"docker://{repository}@{digest}"], what, timeout, "inspect"
        )
    except ModelcarError as error:
        raise ModelcarError(
            f"{error}: the registry does not serve that digest, so it is not registered; check the registry (a "
            "proxy or cache in front of it?) and re-run"
        ) from None
    served = "sha256:" + hashlib.sha256(raw).hexdigest()
    if served != digest:
        raise ModelcarError(
            f"{what}: the registry serves a manifest of digest {served} under it, so it is not registered; check "
            "the registry and re-run"
        )


def pin_layer_times(layout: Path, created: str) -> None:
    """Sets each olot history entry's ``created`` (the blob's ctime) to ``created``: the same files, the same digest."""

    def read(digest: str) -> dict[str, Any]:
        return json.loads((layout / "blobs" / "sha256" / digest.split(":", 1)[1]).read_bytes())

    def write(document: dict[str, Any], descriptor: dict[str, Any]) -> dict[str, Any]:
        data = json.dumps(document, separators=(",", ":")).encode()
        digest = hashlib.sha256(data).hexdigest()
        (layout / "blobs" / "sha256" / digest).write_bytes(data)
        return {**descriptor, "digest": f"sha256:{digest}", "size": len(data)}

    def visit(descriptor: dict[str, Any]) -> dict[str, Any]:
        document = read(descriptor["digest"])
        if "manifests" in document:  # an image index
            children = [visit(child) for child in document["manifests"]]
            if children == document["manifests"]:
                return descriptor
            return write({**document, "manifests": children}, descriptor)
        if "config" not in document:
            return descriptor
        config = read(document["config"]["digest"])
        history = config.get("history") or []
        olot = [item for item in history if str(item.get("created_by", "")).startswith("olot ")]
        if all(item.get("created") == created for item in olot):
            return descriptor
        for item in olot:
            item["created"] = created
        return write({**document, "config": write(config, document["config"])}, descriptor)

    index = json.loads((layout / "index.json").read_text())
    index["manifests"] = [visit(descriptor) for descriptor in index.get("manifests") or []]
    (layout / "index.json").write_text(json.dumps(index, separators=(",", ":")))


def files_time(model_dir: Path) -> str:
    """The newest modification time of the files under ``model_dir``, as RFC 3339 (UTC, seconds)."""
    newest = max((path.stat().st_mtime for path in model_dir.rglob("*") if path.is_file()), default=0.0)
    return datetime.datetime.fromtimestamp(int(newest), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def skopeo_backend(insecure: bool, digest_file: Path, timeout: float = COPY_TIMEOUT_SECONDS, created: str = "") -> Any:
    """A ``save_to_oci_registry`` backend: skopeo with a deadline, TLS choice, ``--digestfile`` and pinned times."""
    from model_registry.utils import BackendDefinition

    tls = "false" if insecure else "true"

    def pull(base_image: str, dest: Path, **kwargs: str) -> None:
        auth = ["--src-authfile", kwargs["authfile"]] if kwargs.get("authfile") else []
        source = f"modelcar_base_image={base_image!r}"
        _skopeo(
            [*auth, f"--src-tls-verify={tls}", "--remove-signatures", f"docker://{base_image}", f"oci:{dest}:latest"],
            f"cannot pull {source}",
            timeout,
        )

    def push(src: Path, oci_ref: str, **kwargs: str) -> None:
        if created:
            pin_layer_times(Path(src), created)
        auth = ["--dest-authfile", kwargs["authfile"]] if kwargs.get("authfile") else []
        arguments = [*auth, f"--dest-tls-verify={tls}", "--digestfile", str(digest_file)]
        _skopeo([*arguments, f"oci:{src}:latest", f"docker://{oci_ref}"], f"cannot push to oci://{oci_ref}", timeout)
        digest = digest_file.read_text().strip() if digest_file.is_file() else ""
        read_auth = ["--authfile", kwargs["authfile"]] if kwargs.get("authfile") else []
        verify_served_digest(oci_ref, digest, read_auth, tls, timeout)  # (the auth file is gone after the push)

    return BackendDefinition(is_available=lambda: shutil.which("skopeo") is not None, pull=pull, push=push)


def merge_adapter(adapter_dir: Path, target: Path) -> None:
    """Merges a peft adapter (with its tokenizer) into its base model, saved in ``target`` (ValueError: cannot here)."""
    base = json.loads((adapter_dir / "adapter_config.json").read_text()).get("base_model_name_or_path") or ""
    try:
        from peft import AutoPeftModelForCausalLM
        from transformers import AutoTokenizer
    except ImportError as error:
        raise ValueError(
            f"modelcar_lora_weights='merged' needs peft and transformers in the registry step to merge the adapter "
            f"({error}); use 'adapter' (served with its base model) or a step image that has them"
        ) from None
    try:
        model = AutoPeftModelForCausalLM.from_pretrained(str(adapter_dir))
    except (OSError, ValueError) as error:
        raise ValueError(
            f"modelcar_lora_weights='merged': cannot load the adapter's base model {base!r} in this step ({error}); "
            "use 'adapter' or give a base model this step can read"
        ) from None
    model.merge_and_unload().save_pretrained(str(target))
    AutoTokenizer.from_pretrained(str(adapter_dir)).save_pretrained(str(target))


def publish_modelcar(
    model_dir: Path,
    metadata: Mapping[str, Any],
    options: ModelcarOptions,
    log: Callable[[str], None],
    merge: Callable[[Path, Path], None] = merge_adapter,
    scratch: Path | None = None,
) -> PublishedModelcar:
    """Layers ``model_dir`` on the base image under ``/models`` and pushes it to ``options.uri``.

    ``merge(adapter_dir, target_dir)`` writes a merged LoRA model; ``scratch``: where the layout and a merged model are
    built (default a temporary directory).

    Raises:
        ModelcarError: Bad target or secret, the client without ``olot``/skopeo, or a failed pull or push.
    """
    check_modelcar_options(options)
    base_image, target = options.base_image, parse_modelcar_uri(options.uri)
    tag_uri = target.uri()
    if not base_image.strip() or base_image.strip().startswith(("oci://", "docker://")):
        raise ModelcarError(f"modelcar_base_image={base_image!r}: give registry/repository:tag (no scheme)")
    if not model_dir.is_dir():
        raise ModelcarError(f"no model directory to publish at {model_dir}")
    kind, base_model = lora_files(model_dir, metadata, options.lora_weights)
    from model_registry.utils import save_to_oci_registry

    _, variable = docker_config_from_env(  # checked here: the client reads it from the process environment
        os.environ,
        (PUSH_SECRET_ENV, PUSH_DOCKERCONFIGJSON_ENV),
        ModelcarError,
        f"secret {PUSH_SECRET_NAME}",
        f"oc create secret generic {PUSH_SECRET_NAME} --from-file={PUSH_SECRET_ENV}=$HOME/.docker/config.json",
    )
    with tempfile.TemporaryDirectory(prefix="modelcar-", dir=scratch) as work:
        files = model_dir
        if kind == "merged" and (model_dir / "adapter_config.json").is_file():
            files = Path(work) / "merged"
            log(f"merging the LoRA adapter into its base model for the modelcar: {files}")
            merge(model_dir, files)
            newest = max(path.stat().st_mtime for path in model_dir.rglob("*") if path.is_file())
            for path in files.rglob("*"):  # the adapter's time: the same adapter gives the same layers
                os.utime(path, (newest, newest))
        digest_file = Path(work) / "digest"
        log(f"publishing modelcar {tag_uri} on {base_image} (olot + skopeo)")
        try:
            save_to_oci_registry(
                base_image=base_image.strip(),
                oci_ref=tag_uri.removeprefix("oci://"),
                model_files_path=str(files),
                dest_dir=str(Path(work) / "layout"),
                custom_oci_backend=skopeo_backend(options.insecure, digest_file, created=files_time(files)),
                oci_auth_env_var=variable or None,
            )
        except ModelcarError:
            raise
        except ImportError as error:
            raise ModelcarError(
                f"modelcar_uri is set but the Model Registry client cannot layer images: {error} (install "
                "model-registry[olot])"
            ) from None
        except (ValueError, RuntimeError, OSError) as error:
            raise ModelcarError(f"cannot layer the model on modelcar_base_image={base_image!r}: {error}") from None
        digest = digest_file.read_text().strip()  # checked by the push (verify_served_digest)
    published = PublishedModelcar(target.uri(digest), tag_uri, digest, kind, base_model if kind == "adapter" else "")
    log(f"modelcar pushed: {published.uri} (tag {published.tag_uri})")
    return published
