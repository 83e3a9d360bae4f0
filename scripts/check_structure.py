#!/usr/bin/env python3
# The structure rules the compiler cannot see (issue 31), checked on the source tree by a test
# (tests/CMakeLists.txt: weft_structure_check): no model header reaches the model registry, no
# dynamic_cast in the models layer (capabilities are on the Model interface), and no function in
# src/ or tools/ longer than MAX_FUNCTION_LINES. Prints "path:line: error: [structure] ..." per
# finding and exits 1 when there is any. Python 3 standard library only.
import argparse
import pathlib
import re
import sys

MAX_FUNCTION_LINES = 80
SOURCE_SUFFIXES = {".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".def", ".in"}
REGISTRY = "weft/models/registry.h"
# Files whose long functions a change in flight splits, with that change: reported as notes, not
# errors, until it lands (then the entry goes).
PENDING_SPLITS = {}


def strip_code(text):
    """The text with comments, string and character literals blanked (newlines kept, so line
    numbers hold) and preprocessor lines removed: what is left is braces and code."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c in " \t":
            out.append(c)
            i += 1
            continue
        if line_start and c == "#":  # a directive, with its continuation lines
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out.append("\n")
                    i += 2
                    continue
                i += 1
            continue
        line_start = c == "\n"
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end == -1 else end + 2
            out.append("\n" * text.count("\n", i, end))
            i = end
            continue
        raw = re.match(r'(?:u8|u|U|L)?R"([^()\\ ]{0,16})\(', text[i:i + 24])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = ")" + raw.group(1) + '"'
            end = text.find(close, i + raw.end())
            end = n if end == -1 else end + len(close)
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
            continue
        if c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):  # not 1'000
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


# The end of a function's head: a parameter list, then qualifiers, a trailing return type, or a
# constructor's initializer list.
FUNCTION_HEAD = re.compile(
    r"\)\s*(?:(?:const|volatile|noexcept|override|final|mutable|&|&&|try)\b\s*|"
    r"noexcept\s*\([^;{}]*\)\s*|&&?\s*|->\s*[\w:<>,\s*&\[\]]+?\s*)*$")
INITIALIZER_LIST = re.compile(r"\)\s*(?:noexcept\s*)?:\s*[^;]*[)}]\s*$")
SCOPE_HEAD = re.compile(r"\b(namespace|class|struct|union|enum|extern)\b")


def functions(code):
    """(first line, last line) of each function body (from its '{' to its '}') outside other
    function bodies; a lambda or local class counts toward the function that holds it."""
    found = []
    stack = []  # per open brace: "scope" (namespace, class), "function", or "init" (a value)
    head = []  # the code since the last ';' or scope brace at the current scope
    line = 1
    body_start = 0
    for c in code:
        if c == "\n":
            line += 1
        inside = "function" in stack or "init" in stack
        if c == "{":
            if inside:
                stack.append("nested")
                continue
            text = "".join(head)
            if FUNCTION_HEAD.search(text) or INITIALIZER_LIST.search(text):
                stack.append("function")
                body_start = line
            elif SCOPE_HEAD.search(text) or not text.strip():
                stack.append("scope")
            else:
                stack.append("init")
                head.append(c)
                continue
            head = []
        elif c == "}":
            if not stack:
                continue
            kind = stack.pop()
            if kind == "function":
                found.append((body_start, line))
                head = []
            elif kind == "init":
                head.append(c)
            elif kind == "scope":
                head = []
        elif not inside:
            if c == ";":
                head = []
            else:
                head.append(c)
    return found


def source_files(root, folders):
    for folder in folders:
        base = root / folder
        if base.is_dir():
            for path in sorted(base.rglob("*")):
                if path.is_file() and path.suffix in SOURCE_SUFFIXES:
                    yield path


def check_function_lengths(root, folders, limit):
    errors = []
    for path in source_files(root, folders):
        code = strip_code(path.read_text(encoding="utf-8", errors="replace"))
        name = path.relative_to(root).as_posix()
        for first, last in functions(code):
            lines = last - first + 1
            if lines <= limit:
                continue
            if name in PENDING_SPLITS:
                print(f"{name}:{first}: note: [structure] a function of {lines} lines, split by "
                      f"{PENDING_SPLITS[name]}")
                continue
            errors.append(f"{name}:{first}: error: [structure] a function of {lines} lines "
                          f"(over {limit}): split it")
    return errors


def includes_of(path):
    text = path.read_text(encoding="utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), 1):
        match = re.match(r'\s*#\s*include\s*"([^"]+)"', line)
        if match:
            yield number, match.group(1)


def check_model_headers(root):
    """No header of the models layer but the registry's own includes the registry, directly or
    through other weft headers."""
    include_dir = root / "include"
    errors = []
    for header in sorted((include_dir / "weft" / "models").glob("*.h")):
        if header.name == "registry.h":
            continue
        seen, todo = set(), [(header, None)]
        while todo:
            current, via = todo.pop()
            for number, name in includes_of(current):
                target = include_dir / name
                first_hop = via or (number, name)
                if name == REGISTRY:
                    line, what = first_hop
                    errors.append(f"{header.relative_to(root)}:{line}: error: [structure] "
                                  f'#include "{what}": a model header reaches the registry '
                                  f"({REGISTRY}); the registry lists models, not the reverse")
                    todo = []
                    break
                if target.is_file() and target not in seen:
                    seen.add(target)
                    todo.append((target, first_hop))
    return errors


def check_no_dynamic_cast(root):
    errors = []
    for path in source_files(root, ["src/models", "include/weft/models"]):
        code = strip_code(path.read_text(encoding="utf-8", errors="replace"))
        for number, line in enumerate(code.splitlines(), 1):
            if re.search(r"\bdynamic_cast\b", line):
                errors.append(f"{path.relative_to(root)}:{number}: error: [structure] "
                              "dynamic_cast in the models layer: ask the Model interface instead")
    return errors


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("root", nargs="?", default=pathlib.Path(__file__).resolve().parent.parent,
                        type=pathlib.Path, help="the source tree (default: this checkout)")
    parser.add_argument("--max-lines", type=int, default=MAX_FUNCTION_LINES)
    parser.add_argument("--list-functions", action="store_true",
                        help="print every function's length (longest first) and exit")
    args = parser.parse_args()
    root = args.root.resolve()
    if args.list_functions:
        rows = []
        for path in source_files(root, ["src", "tools"]):
            for first, last in functions(strip_code(path.read_text(errors="replace"))):
                rows.append((last - first + 1, f"{path.relative_to(root)}:{first}"))
        for lines, where in sorted(rows, reverse=True):
            print(lines, where)
        return 0
    errors = (check_model_headers(root) + check_no_dynamic_cast(root) +
              check_function_lengths(root, ["src", "tools"], args.max_lines))
    for error in errors:
        print(error)
    if errors:
        print(f"[structure] {len(errors)} finding(s) in {root}")
        return 1
    print(f"[structure] {root}: model headers, models layer and function lengths in order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
