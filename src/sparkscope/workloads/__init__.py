"""Driver scripts that spark-submit runs (not imported by the CLI)."""
