"""`sparkscope demo`: TPC-DS on Spark with sparkscope attached. command.py (the
command and its arguments), options.py (what a run is asked and found),
run.py (the workload), summary.py (what arrived, and where to look),
tpcds.py (data and queries), tpcds_driver.py (the script spark-submit runs)."""
