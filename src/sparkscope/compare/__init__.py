"""`./sparkscope compare`: a run against its job's own baseline (the last runs of the same job)."""
