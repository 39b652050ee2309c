"""oci:// base models: pull a model image from an OCI registry into the workspace, digest-verified."""
