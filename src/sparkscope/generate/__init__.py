"""Generators of checked-in files from the Python declarations (run each as python -m sparkscope.generate.<name>)."""
