"""``kfp-finetune doctor``: a preflight of a cluster and namespace for one pipeline run, saying what to fix.

Modules: :mod:`.facts` (the compiled pipeline's settings and the run's values, through the parameters table),
:mod:`.cluster` (the Kubernetes reads, through the training step's client), one module per area of checks
(:mod:`.training`: launcher and permissions; :mod:`.storage` with the :mod:`.provisioners` table;
:mod:`.secret_mounts`; :mod:`.gpus`; :mod:`.endpoints`), :mod:`.report` (lines, JSON, exit code) and
:mod:`.runner` (:func:`~.runner.run_doctor`, all of it in order).
"""
