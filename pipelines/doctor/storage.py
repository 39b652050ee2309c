"""The workspace PVC can be provisioned: its class exists, gives RWX (judged from its provisioner), quota has room."""

from __future__ import annotations

import fnmatch
from typing import Any

from pipelines.doctor.cluster import ApiUnavailable, Cluster, Forbidden
from pipelines.doctor.facts import PipelineFacts
from pipelines.doctor.report import Check, fail, ok, warn

DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
)
RWX_MODE = "ReadWriteMany"
#: Provisioners of shared filesystems (``ReadWriteMany`` filesystem volumes), with the storage they provide.
RWX_PROVISIONERS: dict[str, str] = {
    "nfs.csi.k8s.io": "NFS (csi-driver-nfs)",
    "*nfs-subdir-external-provisioner*": "NFS (nfs-subdir-external-provisioner)",
    "*nfs-provisioner*": "NFS",
    "*.cephfs.csi.ceph.com": "CephFS (Ceph CSI / OpenShift Data Foundation)",
    "cephfs.csi.ceph.com": "CephFS (Ceph CSI)",
    "kubernetes.io/cephfs": "CephFS (in-tree)",
    "efs.csi.aws.com": "Amazon EFS",
    "fsx.csi.aws.com": "Amazon FSx for Lustre",
    "file.csi.azure.com": "Azure Files",
    "kubernetes.io/azure-file": "Azure Files (in-tree)",
    "filestore.csi.storage.gke.io": "GCP Filestore",
    "com.ibm.spectrum.scale.csi": "IBM Storage Scale",
    "spectrumscale.csi.ibm.com": "IBM Storage Scale",
    "vpc.file.csi.ibm.io": "IBM Cloud File Storage",
    "driver.longhorn.io": "Longhorn (RWX through its NFS share manager)",
    "lustre.csi.hpe.com": "Lustre",
    "*.csi.weka.io": "WEKA",
    "csi.weka.io": "WEKA",
    "*glusterfs*": "GlusterFS",
    "manila.csi.openstack.org": "OpenStack Manila",
}
#: Provisioners of block devices: ``ReadWriteOnce`` filesystems only.
RWO_PROVISIONERS: dict[str, str] = {
    "ebs.csi.aws.com": "Amazon EBS",
    "kubernetes.io/aws-ebs": "Amazon EBS (in-tree)",
    "disk.csi.azure.com": "Azure Disk",
    "kubernetes.io/azure-disk": "Azure Disk (in-tree)",
    "pd.csi.storage.gke.io": "GCP Persistent Disk",
    "kubernetes.io/gce-pd": "GCP Persistent Disk (in-tree)",
    "*.rbd.csi.ceph.com": "Ceph RBD (block)",
    "rbd.csi.ceph.com": "Ceph RBD (block)",
    "kubernetes.io/rbd": "Ceph RBD (in-tree)",
    "kubernetes.io/vsphere-volume": "vSphere volumes (in-tree)",
    "cinder.csi.openstack.org": "OpenStack Cinder",
    "rancher.io/local-path": "local-path",
    "kubernetes.io/no-provisioner": "local volumes",
    "topolvm.io": "TopoLVM / LVMS",
    "topolvm.cybozu.com": "TopoLVM / LVMS",
    "kubevirt.io.hostpath-provisioner": "hostpath provisioner",
    "k8s.io/minikube-hostpath": "minikube hostpath",
    "vpc.block.csi.ibm.io": "IBM Cloud Block Storage",
}


def judge(provisioner: str) -> tuple[str, str]:
    """``("rwx" | "rwo" | "unknown", the storage it is)`` for a StorageClass's ``provisioner``."""
    for table, verdict in ((RWX_PROVISIONERS, "rwx"), (RWO_PROVISIONERS, "rwo")):
        for pattern, storage in table.items():
            if fnmatch.fnmatchcase(provisioner, pattern):
                return verdict, storage
    return "unknown", ""


def _recompile(flag: str, example: str) -> str:
    constant = flag.upper().replace("-", "_")
    return (
        f"recompile with `kfp-finetune compile --{flag} {example}` (or KFP_FINETUNE_{constant}, or {constant} at the "
        "top of the pipeline's pipeline.py, as the RHOAI guide edits it)"
    )


def _find_class(cluster: Cluster, facts: PipelineFacts) -> tuple[dict[str, Any] | None, Check | None]:
    """The storage class the PVC will use, or the finding that says why there is none."""
    name = facts.storage_class
    if name:
        found = cluster.storage_class(name)
        if found is not None:
            return found, None
        classes = cluster.storage_classes()
        listed = ", ".join(f"{(c.get('metadata') or {}).get('name')} ({c.get('provisioner', '?')})" for c in classes)
        what = f"storage class {name!r} (workspace PVC, compile-time) not found (available: {listed or 'none'})"
        return None, fail("storage", what, _recompile("pvc-storage-class", "<an RWX class>"))
    classes = [(item, (item.get("metadata") or {}).get("annotations") or {}) for item in cluster.storage_classes()]
    defaults = [item for item, notes in classes if any(notes.get(key) == "true" for key in DEFAULT_CLASS_ANNOTATIONS)]
    if defaults:
        return defaults[0], None
    what = "the workspace PVC names no storage class and the cluster has no default storage class"
    return None, fail("storage", what, _recompile("pvc-storage-class", "<an RWX class>"))


def _rwx(storage_class: dict[str, Any], facts: PipelineFacts) -> Check:
    name = (storage_class.get("metadata") or {}).get("name")
    provisioner = str(storage_class.get("provisioner", ""))
    if RWX_MODE not in facts.access_modes:
        what = f"the workspace PVC asks for {list(facts.access_modes)}, not {RWX_MODE}"
        remedy = _recompile("pvc-access-modes", RWX_MODE)
        return warn("storage", what, f"steps and training pods on different nodes cannot share it; {remedy}")
    verdict, storage = judge(provisioner)
    if verdict == "rwx":
        return ok("storage", f"storage class {name!r} exists; provisioner {provisioner} ({storage}) gives {RWX_MODE}")
    if verdict == "rwo":
        what = f"storage class {name!r}: provisioner {provisioner} ({storage}) gives no {RWX_MODE} filesystems"
        return fail("storage", what, _recompile("pvc-storage-class", "<an NFS, CephFS, EFS or Azure Files class>"))
    what = f"storage class {name!r}: provisioner {provisioner!r} is not known to support {RWX_MODE}"
    remedy = _recompile("pvc-storage-class", "<a known RWX class>")
    return warn("storage", what, f"check its documentation (a PVC it cannot bind stays Pending), or {remedy}")


def _quota_problems(quota: dict[str, Any], storage_class: str, size: str) -> list[str]:
    """What a ResourceQuota leaves too little of for one more PVC of ``size`` in ``storage_class``."""
    from kubernetes.utils import parse_quantity

    hard = (quota.get("status") or {}).get("hard") or (quota.get("spec") or {}).get("hard") or {}
    used = (quota.get("status") or {}).get("used") or {}
    scoped = f"{storage_class}.storageclass.storage.k8s.io/" if storage_class else None
    problems = []
    for resource, needed, shown in (("requests.storage", parse_quantity(size), size), ("persistentvolumeclaims", 1, 1)):
        for key in (resource, f"{scoped}{resource}" if scoped else None):
            if key and key in hard:
                left = parse_quantity(hard[key]) - parse_quantity(used.get(key, "0"))
                if left < needed:
                    problems.append(f"{key}: {used.get(key, '0')} of {hard[key]} used, {shown} more needed")
    return problems


def _quota(cluster: Cluster, facts: PipelineFacts, storage_class: str) -> Check:
    quotas = cluster.quotas()
    problems = [
        f"ResourceQuota {(quota.get('metadata') or {}).get('name')!r} {problem}"
        for quota in quotas
        for problem in _quota_problems(quota, storage_class, facts.pvc_size)
    ]
    if problems:
        what = f"no quota headroom for the {facts.pvc_size} workspace PVC in {cluster.namespace}: {'; '.join(problems)}"
        remedy = "delete unused PVCs, ask for a larger quota, or " + _recompile("pvc-size", "<smaller>")
        return fail("storage", what, remedy)
    if not quotas:
        return ok("storage", f"no ResourceQuota in {cluster.namespace} limits the {facts.pvc_size} workspace PVC")
    return ok("storage", f"ResourceQuota headroom in {cluster.namespace} fits the {facts.pvc_size} workspace PVC")


def check_storage(cluster: Cluster, facts: PipelineFacts) -> list[Check]:
    """The storage class exists, RWX is judged from its provisioner, quota has room for the PVC size."""
    if not facts.pvc_size:
        return [ok("storage", "the pipeline has no workspace PVC")]
    storage_class = None
    try:
        storage_class, problem = _find_class(cluster, facts)
        checks = [problem or _rwx(storage_class, facts)]
    except Forbidden as error:
        remedy = f"ask an admin whether {facts.storage_class or 'the default class'} exists and gives RWX"
        checks = [warn("storage", f"cannot read storage classes ({error})", remedy)]
    except ApiUnavailable as error:
        checks = [warn("storage", f"could not read storage classes: {error}", "check the API server")]
    class_name = facts.storage_class or ((storage_class or {}).get("metadata") or {}).get("name", "")
    try:
        checks.append(_quota(cluster, facts, class_name))
    except Forbidden as error:
        what = f"cannot read ResourceQuotas in {cluster.namespace} ({error})"
        checks.append(warn("storage", what, "check `oc describe quota` for storage headroom"))
    except ApiUnavailable as error:
        checks.append(warn("storage", f"could not read ResourceQuotas: {error}", "check the API server"))
    return checks
