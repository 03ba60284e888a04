"""Attaching sparkscope to Spark: the properties (conf.py) and spark-submit (submit.py)."""
