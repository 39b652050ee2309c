"""Which storage provisioners give ``ReadWriteMany`` volumes: the one table doctor judges a storage class by.

Patterns are ``fnmatch`` globs over the StorageClass's ``provisioner``. A provisioner in neither table is ``unknown``
(doctor warns and names it). Block-storage provisioners are listed as RWO-only: they serve RWX only for raw block
volumes, never for the filesystem the pipeline's workspace needs.
"""

from __future__ import annotations

import fnmatch

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

RWX, RWO, UNKNOWN = "rwx", "rwo", "unknown"


def judge(provisioner: str) -> tuple[str, str]:
    """Whether ``provisioner`` gives ``ReadWriteMany`` filesystems.

    Args:
        provisioner: A StorageClass's ``provisioner``.

    Returns:
        ``(verdict, storage)``: :data:`RWX`, :data:`RWO` or :data:`UNKNOWN`, and what storage it is (``""`` when
        unknown).
    """
    for table, verdict in ((RWX_PROVISIONERS, RWX), (RWO_PROVISIONERS, RWO)):
        for pattern, storage in table.items():
            if fnmatch.fnmatchcase(provisioner, pattern):
                return verdict, storage
    return UNKNOWN, ""
