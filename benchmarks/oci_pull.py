"""Times an ``oci://`` base-model pull from a real local registry against ``skopeo copy`` of the same image.

A 256 MiB modelcar (one uncompressed tar layer with ``/models/model.safetensors``) is pushed to a ``docker-registry``
on 127.0.0.1; then :func:`~components.training.finetuning.oci.model.pull_model` pulls it (download, SHA-256 check,
extraction, atomic rename) and ``skopeo copy docker://... dir:`` copies it (download and check only, no extraction).
Target: the pull takes at most 3x skopeo's time in the same run; reusing the verified copy takes < 0.5 s.

Usage: ``python benchmarks/oci_pull.py [MiB] [--write-figures]`` (needs docker-registry and skopeo);
``--write-figures`` records the figures in ``docs/figures.json`` (``oci_pull.*``, the training README's "Figures").
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    """Builds, pushes, pulls (twice), reuses and copies with skopeo; prints the timings and the ratio."""
    from components.training.finetuning.oci.model import pull_model
    from tests.harness import oci_registry as harness

    sizes = [argument for argument in sys.argv[1:] if argument.isdigit()]
    mib = int(sizes[0]) if sizes else 256
    work = Path(tempfile.mkdtemp(prefix="oci-bench-"))
    registry = harness.start_registry(work / "server")
    try:
        layout = work / "layout"
        layout.mkdir()
        raw = harness.tar_layer({"models/config.json": b"{}", "models/model.safetensors": os.urandom(mib << 20)})
        layer = {"mediaType": "application/vnd.oci.image.layer.v1.tar", **harness._blob(layout, raw)}
        image_config = {"architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": []}}
        image_config["rootfs"]["diff_ids"] = ["sha256:" + hashlib.sha256(raw).hexdigest()]
        config = {"mediaType": harness.OCI_CONFIG, **harness._blob(layout, json.dumps(image_config).encode())}
        harness._finish_layout(layout, config, [layer], "1")
        del raw
        registry.push(layout, "1", "models/big:1")
        uri = f"oci://{registry.host}/models/big:1"
        pulls = []
        for attempt in range(2):
            started = time.perf_counter()
            pulled = pull_model(uri, work / f"cache-{attempt}", {}, insecure=True, log=lambda line: None)
            pulls.append(time.perf_counter() - started)
            print(f"pull {mib} MiB: {pulls[-1]:.2f}s ({mib * 1.048576 / pulls[-1]:.0f} MB/s)")
        started = time.perf_counter()
        pull_model(uri, work / "cache-1", {}, insecure=True, log=lambda line: None)
        reuse = time.perf_counter() - started
        print(f"reuse by tag (manifest request + size check): {reuse:.3f}s; pinned {pulled.uri[-12:]}...")
        started = time.perf_counter()
        source = f"docker://{registry.host}/models/big:1"
        subprocess.run(
            ["skopeo", "copy", "--quiet", "--src-tls-verify=false", source, f"dir:{work}/skopeo"], check=True
        )
        skopeo = time.perf_counter() - started
        ratio = min(pulls) / skopeo
        started = time.perf_counter()
        pull_model(pulled.uri, work / "cache-1", {}, insecure=True, log=lambda line: None)
        by_digest = time.perf_counter() - started
        print(f"reuse by digest: {by_digest * 1000:.1f} ms")
        print(f"skopeo copy (no extraction): {skopeo:.2f}s; pull/skopeo = {ratio:.2f}x")
        print(
            f"target pull <= 3x skopeo: {'met' if ratio <= 3 else 'NOT met'}; reuse < 0.5 s: "
            f"{'met' if reuse < 0.5 else 'NOT met'}"
        )
        if "--write-figures" in sys.argv:
            from scripts.figures import figure, record

            rates = sorted(mib * 1.048576 / seconds for seconds in pulls)
            record(
                {
                    "oci_pull.mib": figure(mib, "MiB"),
                    "oci_pull.seconds": figure(pulls, "s", f"{min(pulls):.1f}–{max(pulls):.1f}"),
                    "oci_pull.mb_per_second": figure(rates, "MB/s", f"{rates[0]:.0f}–{rates[-1]:.0f}"),
                    "oci_pull.per_skopeo": figure(ratio, "x", f"{ratio:.1f}"),
                    "oci_pull.reuse_by_tag": figure(reuse, "s", f"{reuse:.2f}"),
                    "oci_pull.reuse_by_digest": figure(by_digest * 1000, "ms", f"{by_digest * 1000:.0f}"),
                },
                "benchmarks/oci_pull.py",
            )
    finally:
        registry.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
