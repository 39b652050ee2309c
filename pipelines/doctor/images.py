"""Can the namespace pull every image the pipeline's steps run on?

An internal-registry image needs its ImageStream tag; any other image is asked of its registry, anonymously, then
with the pull secrets of the pipeline pods' service account. A registry that does not answer from here is a WARN.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from components._common.oci_reference import auths_of, credentials_for
from pipelines.doctor.cluster import ApiUnavailable, Cluster, Forbidden
from pipelines.doctor.report import Check, fail, ok, warn
from pipelines.images.pipeline_images import distinct, step_images
from pipelines.images.pull_check import check_images, fix_for
from pipelines.images.registry import DENIED, FOUND, MISSING, UNREACHABLE, ImageReference, check_manifest, parse_image

AREA = "images"
INTERNAL_REGISTRY = "image-registry.openshift-image-registry.svc:5000"
IMAGE_API = ("image.openshift.io", "v1", "imagestreams")


def _image_streams(cluster: Cluster) -> list[dict[str, Any]] | None:
    """The namespace's ImageStreams (``None``: the API does not serve them, i.e. not OpenShift)."""
    group, version, plural = IMAGE_API
    listing = cluster.api.custom.list_namespaced_custom_object
    try:
        answer = cluster.read(
            "listing ImageStreams", listing, group, version, cluster.namespace, plural, missing_ok=True
        )
    except (Forbidden, ApiUnavailable):
        return None
    return None if answer is None else answer.get("items") or []


def _tag_image(stream: Mapping[str, Any], tag: str) -> str:
    """The image (digest) an ImageStream's ``status.tags[tag]`` points to (``""``: no such tag, or no image yet)."""
    for entry in (stream.get("status") or {}).get("tags") or []:
        if entry.get("tag") == tag and entry.get("items"):
            return str(entry["items"][0].get("image") or entry["items"][0].get("dockerImageReference") or "?")
    return ""


def _imported_by(streams: list[dict[str, Any]], image: str) -> str:
    """The ``name:tag`` of an ImageStream tag that imported ``image`` (``spec.tags[].from.name``), or ``""``."""
    for stream in streams:
        for entry in (stream.get("spec") or {}).get("tags") or []:
            source = entry.get("from") or {}
            if (source.get("kind"), source.get("name")) == ("DockerImage", image) and _tag_image(stream, entry["name"]):
                return f"{stream['metadata']['name']}:{entry['name']}"
    return ""


def _pull_secret_config(cluster: Cluster) -> tuple[dict[str, Any], list[str]]:
    """The merged ``.dockerconfigjson`` auths of the pipeline pods' service account's pull secrets, and their names."""
    core = cluster.api.core
    try:
        accounts = cluster.read("listing service accounts", core.list_namespaced_service_account, cluster.namespace)
    except (Forbidden, ApiUnavailable):
        return {}, []
    accounts = accounts.get("items") or []
    runners = [a for a in accounts if a["metadata"]["name"].startswith("pipeline-runner")]
    runners = runners or [a for a in accounts if a["metadata"]["name"] == "default"]
    names = [ref["name"] for account in runners for ref in account.get("imagePullSecrets") or [] if ref.get("name")]
    auths: dict[str, Any] = {}
    for name in dict.fromkeys(names):
        try:
            secret = cluster.read(f"reading pull secret {name!r}", core.read_namespaced_secret, name, cluster.namespace)
        except (Forbidden, ApiUnavailable):  # a missing one (404) too
            continue
        data = (secret or {}).get("data") or {}
        raw = data.get(".dockerconfigjson") or data.get(".dockercfg") or ""
        try:
            config = json.loads(base64.b64decode(raw)) if raw else {}
        except (ValueError, TypeError):
            config = {}
        auths.update(auths_of(config))
        if secret:
            secret.clear()
    return {"auths": auths}, list(dict.fromkeys(names))


def _internal_image(cluster: Cluster, streams: list[dict[str, Any]] | None, image: ImageReference) -> Check:
    namespace, _, name = image.repository.partition("/")
    build = (
        f"`oc new-build --binary --strategy=docker --name {name} -n {namespace}` then `oc start-build {name} "
        f"--from-dir . --follow -n {namespace}` in a clone, and compile with --image {image.text}"
    )
    if namespace != cluster.namespace:
        return warn(AREA, f"image {image.text}: an ImageStream of namespace {namespace}, not checked from here", build)
    if streams is None:
        return fail(AREA, f"image {image.text}: this cluster serves no ImageStreams (image.openshift.io/v1)", build)
    stream = next((s for s in streams if s["metadata"]["name"] == name), None)
    if stream is None:
        return fail(AREA, f"image {image.text}: no ImageStream {name!r} in {namespace}", build)
    digest = _tag_image(stream, image.tag)
    if not digest:
        return fail(AREA, f"image {image.text}: ImageStream {name!r} has no image under tag {image.tag!r}", build)
    return ok(AREA, f"image {image.text}: ImageStream {name!r} tag {image.tag!r} holds {digest}")


def check_images_in_namespace(
    cluster: Cluster | None, spec: Mapping[str, Any], docker_config: Mapping | None
) -> list[Check]:
    """One line per image of the pipeline's steps, one WARN per unreachable registry (``cluster`` ``None``: none)."""
    images = list(distinct(step_images(spec, "")))
    streams = _image_streams(cluster) if cluster else None
    checks: list[Check] = []
    external = []
    for text in images:
        image = parse_image(text)
        if image.registry == INTERNAL_REGISTRY and cluster is not None:
            checks.append(_internal_image(cluster, streams, image))
        elif streams and (stream := _imported_by(streams, text)):
            checks.append(ok(AREA, f"image {text}: imported by ImageStream {stream}"))
        else:
            external.append(text)
    findings = check_images(external, docker_config)
    secret_config, secret_names = ({}, [])
    if cluster is not None and any(f.status in (DENIED, MISSING) for f in findings):
        secret_config, secret_names = _pull_secret_config(cluster)
    for finding in findings:
        if finding.status == FOUND:
            digest = finding.digest or "no digest given"
            checks.append(ok(AREA, f"image {finding.images[0]}: in its registry ({digest})"))
        elif finding.status == UNREACHABLE:
            checks.append(warn(AREA, finding.line, ""))
        else:
            image = parse_image(finding.images[0])
            credentials = credentials_for(secret_config, image.registry)
            if credentials is not None:
                answer = check_manifest(image, credentials)
                where = f"pull secret(s) {', '.join(secret_names)} of the pipeline's service account"
                if answer.status == FOUND:
                    checks.append(ok(AREA, f"image {image.text}: pulled with {where} ({answer.digest or 'found'})"))
                    continue
                checks.append(fail(AREA, f"image {image.text}: {answer.detail} with {where}", fix_for(image)))
                continue
            checks.append(fail(AREA, finding.line, ""))
    return checks
