"""sparkscope_dev: the developers' side of the project, beside the product and
never imported by it (tests/test_testkit.py): the test command
(`./sparkscope test`, which the launcher runs as `python -m sparkscope_dev`),
the tools only the test suite builds or installs (the dashboard checker,
helm, kubeconform, compose's validator, Chromium, Debian's bpftrace, libfuse2
and tmux) and the browser the tests open our own pages in."""
