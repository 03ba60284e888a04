"""sparkscope: live per-executor monitoring of Apache Spark."""

__version__ = "0.1.0"
