"""Generators of checked-in files from the Python declarations, and the one
command that runs them all in order (steps.py):

    .venv/bin/python -m sparkscope.generate           # write every generated file
    .venv/bin/python -m sparkscope.generate --check   # exit 1 and list the stale ones
"""
