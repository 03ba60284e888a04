"""What a reader of the code would trip over before running it: a name used
but never defined (a NameError waiting for the one path that reaches it), an
import nothing uses, an f-string without a field. pyflakes reads every
Python file of the product, the testkit, the tests and the benches."""

from __future__ import annotations


from pyflakes.api import checkPath
from pyflakes.reporter import Reporter

from sparkscope.settings import ROOT

TREES = ("src", "tests", "bench", "tools")


class Collected(Reporter):
    def __init__(self):
        self.found: list[str] = []

    def unexpectedError(self, filename, message):
        self.found.append(f"{filename}: {message}")

    def syntaxError(self, filename, msg, lineno, offset, text):
        self.found.append(f"{filename}:{lineno}: {msg}")

    def flake(self, message):
        self.found.append(str(message))


def problems(paths) -> list[str]:
    reporter = Collected()
    for path in paths:
        checkPath(str(path), reporter)
    return reporter.found


def test_no_python_file_uses_an_undefined_name_or_imports_what_it_never_uses():
    files = sorted(p for tree in TREES for p in (ROOT / tree).rglob("*.py") if "__pycache__" not in p.parts)
    assert len(files) > 100
    found = problems(files)
    assert not found, "\n".join(found)


def test_the_check_finds_a_name_that_only_one_path_reaches(tmp_path):
    module = tmp_path / "page.py"
    module.write_text("import json\n\n\ndef row(e):\n    if e:\n        return e.get(TOTAL_GC_TIME)\n    return None\n")
    found = problems([module])
    assert any("undefined name 'TOTAL_GC_TIME'" in f for f in found), found
    assert any("'json' imported but unused" in f for f in found), found
