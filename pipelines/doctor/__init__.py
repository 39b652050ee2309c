"""``kfp-finetune doctor``: a preflight of a cluster and namespace for one pipeline run, saying what to fix.

:func:`.runner.run_doctor` runs the checks, one module per area, over :mod:`.facts` and :mod:`.cluster`.
"""
