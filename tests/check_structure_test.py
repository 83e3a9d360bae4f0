#!/usr/bin/env python3
# The structure check (scripts/check_structure.py) catches what it is for: on a small made-up
# tree it reports exactly the model header that reaches the registry (directly and through
# another header), the dynamic_casts in code (not those in comments or strings), and the
# functions over the limit, with the right line counts; braces in strings, comments, raw
# strings and initializer lists do not fool its function scanner.
# Usage: check_structure_test.py <path to check_structure.py>
import pathlib
import subprocess
import sys
import tempfile


def body(lines):
    """A function body of exactly `lines` lines, from its '{' line to its '}' line."""
    return "{\n" + "  x += 1;\n" * (lines - 2) + "}\n"


FILES = {
    "include/weft/models/registry.h": '#include "weft/models/model.h"\n',
    "include/weft/models/model.h": "#pragma once\n",
    "include/weft/models/good.h": '#pragma once\n#include "weft/models/model.h"\n',
    "include/weft/models/direct.h": '#pragma once\n\n#include "weft/models/registry.h"\n',
    "include/weft/models/indirect.h": '#pragma once\n#include "weft/models/direct.h"\n',
    "src/models/cast.cpp": (
        "// dynamic_cast<int*> in a comment\n"
        'const char* s = "dynamic_cast<int*>(p)";\n'
        "void f(Base* b) {\n"
        "  auto* d = dynamic_cast<Derived*>(b);\n"
        "}\n"),
    "src/a.cpp": (
        "namespace weft {\n"
        "namespace {\n"
        "int eighty() " + body(80) +  # line 3: at the limit, not reported
        "}  // namespace\n"
        "int eighty_one(int x) const " + body(81) +  # line 84
        "Widget::Widget(int a) : a_(a), b_{1, 2} " + body(85) +  # line 165
        "struct Holder : Base {\n"  # line 250
        "  void tricky() {\n"  # line 251: braces in literals and comments
        '    const char* open = "{{{";\n'
        "    char close = '}';\n"
        "    /* } } */ // }\n"
        '    auto raw = R"x( } { )" )x";\n'
        "    auto lambda = [&] { return 1; };\n"
        "  }\n"  # line 257: 7 lines
        "  auto trailing() -> int " + body(90) +  # line 258
        "};\n"
        "}  // namespace weft\n"),
    "tools/t/main.cpp": "int main() " + body(100),
}

EXPECTED = [
    'include/weft/models/direct.h:3: error: [structure] #include "weft/models/registry.h": a '
    "model header reaches the registry",
    'include/weft/models/indirect.h:2: error: [structure] #include "weft/models/direct.h": a '
    "model header reaches the registry",
    "src/models/cast.cpp:4: error: [structure] dynamic_cast in the models layer",
    "src/a.cpp:84: error: [structure] a function of 81 lines (over 80)",
    "src/a.cpp:165: error: [structure] a function of 85 lines (over 80)",
    "src/a.cpp:258: error: [structure] a function of 90 lines (over 80)",
    "tools/t/main.cpp:1: error: [structure] a function of 100 lines (over 80)",
]


def main():
    checker = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for name, text in FILES.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        run = subprocess.run([sys.executable, checker, str(root)], capture_output=True, text=True)
        lines = [line for line in run.stdout.splitlines() if ": error: " in line]
        problems = []
        if run.returncode != 1:
            problems.append(f"exit code {run.returncode}, expected 1")
        for expected in EXPECTED:
            if not any(line.startswith(expected) for line in lines):
                problems.append(f"not reported: {expected}")
        if len(lines) != len(EXPECTED):
            problems.append(f"{len(lines)} findings, expected {len(EXPECTED)}")
        listing = subprocess.run([sys.executable, checker, str(root), "--list-functions"],
                                 capture_output=True, text=True).stdout
        if "7 src/a.cpp:251" not in listing:
            problems.append("the function with braces in literals is not 7 lines at src/a.cpp:251")
        if problems:
            print("\n".join(problems))
            print("the checker said:\n" + run.stdout + run.stderr)
            return 1
    print(f"the structure check reports all {len(EXPECTED)} planted findings and nothing else")
    return 0


if __name__ == "__main__":
    sys.exit(main())
