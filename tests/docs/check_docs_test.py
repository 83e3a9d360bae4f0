#!/usr/bin/env python3
"""The documentation test catches what it should, on made-up pages: an unmarked or malformed
fence, a mark without a reason, an excerpt that drifted from its file, a skipped block that does
not parse, a failing Python or shell block (named by page and line); `continues` shares a
namespace, and a block needing an optional module that is absent is skipped.
Usage: check_docs_test.py path/to/check_docs.py"""

import importlib.util
import sys
import tempfile
from pathlib import Path

FENCE = "```"


def load(script):
    spec = importlib.util.spec_from_file_location("check_docs", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def page(*blocks):
    """A page of (info, code) blocks, each after a line of prose."""
    return "".join(f"Some prose.\n\n{FENCE}{info}\n{code}{FENCE}\n\n" for info, code in blocks)


def tree(readme, doc=""):
    root = Path(tempfile.mkdtemp(prefix="check_docs_test_"))
    (root / "docs").mkdir()
    (root / "README.md").write_text(readme)
    (root / "docs" / "page.md").write_text(doc)
    (root / "quoted.cpp").write_text("int f() {\n  return g(1,\n           2);  // two\n}\n")
    return root


def expect(found, *wanted):
    text = "\n".join(found)
    for w in wanted:
        assert w in text, f"expected {w!r} in:\n{text}"


def main():
    docs = load(sys.argv[1])
    good = tree(page(("python", "x = 1\n"), ("python continues", "assert x == 1\n"),
                     ("sh", "echo ok\n"), ("cpp excerpt=quoted.cpp", "return g(1, 2);\n"),
                     ("cmake no-run: a fragment of a project", "project(x)\n"),
                     ("cpp partial: g is elsewhere", "g(\n")))
    assert docs.check(good) == [], docs.check(good)
    assert docs.run_python(good, sys.executable, None) == []
    assert docs.run_sh(good, None) == []

    bad = tree(page(("", "x\n"), ("cmake", "project(x)\n"), ("python no-run", "x\n"),
                    ("sh sometimes: why", "true\n"), ("cpp excerpt=quoted.cpp", "return g(2, 1);\n"),
                    ("python partial: a fragment", "def f(:\n"), ("sh no-run: slow", "if then\n"),
                    ("cpp excerpt=missing.cpp", "x\n")),
               page(("python continues", "y = 2\n")))
    expect(docs.check(bad), "README.md:4: a fence without a language",
           "README.md:10: a ```cmake block cannot run", "`no-run` needs a reason",
           "unknown mode 'sometimes'", "this line is not in the file (in order): returng(2,1);",
           "a Python syntax error", "a shell syntax error", "excerpt=missing.cpp: no such file",
           "page.md:4: `continues` follows no runnable python block")

    failing = tree(page(("python", "x = 1\n"), ("python continues", "\n\nraise ValueError(x)\n"),
                        ("sh", "true\nfalse\necho never\n")))
    expect(docs.run_python(failing, sys.executable, None), "README.md:4: exit 1",
           'File "README.md", line 12', "ValueError: 1")
    expect(docs.run_sh(failing, None), "README.md:18: exit 1")
    # A block importing an optional module the interpreter lacks is skipped, not failed.
    docs.OPTIONAL_MODULES = ("no_such_module_for_check_docs",)
    optional = tree(page(("python", "import no_such_module_for_check_docs\n")))
    assert docs.run_python(optional, sys.executable, None) == []
    print("check_docs catches every case")


if __name__ == "__main__":
    main()
