"""Pure builders of the job manifests: one validated JobSpec, built as a TrainJob or a PyTorchJob."""
