"""``kfp-finetune doctor``: a preflight of a cluster and namespace for one pipeline run (:func:`.runner.run_doctor`)."""
