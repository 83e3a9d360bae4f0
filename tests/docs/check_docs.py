#!/usr/bin/env python3
"""The documentation test: every fenced code block of README.md and docs/*.md runs, or says in
its fence why not. docs/README.md states the conventions; in short, a fence's info string is

    LANG [MODE[: reason]]      MODE: partial | no-run | continues | excerpt=PATH

and a block without a MODE runs: ```python in a fresh /usr/bin/python3 with the built module,
```sh with bash -e, ```cpp compiled into the build (tests/docs/CMakeLists.txt) and run when it
defines main. Subcommands: `extract-cpp DIR` (configure time: writes the C++ blocks that compile
and a CMake list of them), `check` (every fence well formed, excerpts found, skipped blocks'
syntax), `python`, `sh`, `cpp DIR` (run the blocks of that language). Standard library only."""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

RUNNABLE = {"python": "python", "py": "python", "cpp": "cpp", "c++": "cpp", "sh": "sh",
            "bash": "sh"}
MODES = ("partial", "no-run", "continues")
BLOCK_TIMEOUT_S = 300
# A Python block importing one of these is skipped (and says so) where it is not installed, as
# the Python tests skip: python3-torch is optional (scripts/install_deps.sh, WEFT_NO_TORCH).
OPTIONAL_MODULES = ("torch",)
FENCE = re.compile(r"^(\s*)(```+|~~~+)(.*)$")


@dataclass
class Block:
    path: Path          # the Markdown file
    line: int           # the line of the block's first code line (1-based)
    info: str           # the fence's info string, as written
    code: str
    lang: str = ""      # python / cpp / sh, or the written language for others
    mode: str = ""      # "" (runs), partial, no-run, continues, excerpt
    reason: str = ""
    excerpt: str = ""   # excerpt=PATH
    problems: list = field(default_factory=list)

    @property
    def where(self):
        return f"{self.path.name}:{self.line}"


def parse_info(block):
    """Splits `LANG [MODE[: reason]]` into the block's fields; records malformed fences."""
    words = block.info.split(None, 1)
    if not words:
        block.problems.append("a fence without a language: write ```LANG (python, cpp, sh, ...)")
        return
    written = words[0].lower()
    block.lang = RUNNABLE.get(written, written)
    rest = words[1].strip() if len(words) > 1 else ""
    if not rest:
        if block.lang not in RUNNABLE.values():
            block.problems.append(f"a ```{written} block cannot run: mark it `partial: reason`, "
                                  "`no-run: reason` or `excerpt=PATH`")
        return
    mode, _, reason = rest.partition(":")
    mode = mode.strip()
    if mode.startswith("excerpt="):
        block.mode, block.excerpt = "excerpt", mode[len("excerpt="):]
    elif mode in MODES:
        block.mode = mode
    else:
        block.problems.append(f"unknown mode {mode!r} in ```{block.info}; modes: "
                              f"{', '.join(MODES)}, excerpt=PATH")
        return
    block.reason = reason.strip()
    if block.mode in ("partial", "no-run") and not block.reason:
        block.problems.append(f"`{block.mode}` needs a reason: ```{written} {block.mode}: why")
    if block.mode == "continues" and block.lang != "python":
        block.problems.append("`continues` is for python blocks only")


def read_blocks(path):
    """The fenced code blocks of one Markdown file, in order."""
    blocks, lines, i = [], path.read_text(encoding="utf-8").split("\n"), 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence, info = opening.groups()
        body, j = [], i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j])
            j += 1
        block = Block(path, i + 2, info.strip(), "\n".join(body) + "\n")
        if j == len(lines):
            block.problems.append("the fence is never closed")
        parse_info(block)
        blocks.append(block)
        i = j + 1
    return blocks


def doc_files(root):
    return [root / "README.md"] + sorted((root / "docs").glob("*.md"))


def all_blocks(root):
    return [b for path in doc_files(root) for b in read_blocks(path)]


def cpp_name(block):
    """The file and target name of a compiled C++ block: doc_<file>_<line>."""
    return "doc_" + re.sub(r"\W", "_", block.path.stem) + f"_{block.line}"


def compiles(block):
    return block.lang == "cpp" and block.mode in ("", "no-run")


def extract_cpp(root, out_dir):
    """Writes each C++ block that compiles to out_dir/<name>.cpp (only when changed, so a rebuild
    recompiles only edited blocks) and out_dir/blocks.cmake listing `name;has_main;runs`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    for block in all_blocks(root):
        if not compiles(block):
            continue
        name = cpp_name(block)
        text = f'#line {block.line} "{block.path.name}"\n{block.code}'
        target = out_dir / f"{name}.cpp"
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
        has_main = re.search(r"\bint\s+main\s*\(", block.code) is not None
        runs = has_main and block.mode == ""
        entries.append(f"{name} {'ON' if has_main else 'OFF'} {'ON' if runs else 'OFF'}")
    for stale in set(out_dir.glob("doc_*.cpp")) - {out_dir / f"{e.split()[0]}.cpp" for e in entries}:
        stale.unlink()
    (out_dir / "blocks.cmake").write_text(
        "set(WEFT_DOC_CPP_BLOCKS\n  " + "\n  ".join(f'"{e}"' for e in entries) + ")\n",
        encoding="utf-8")


def code_lines(text, comment):
    """A text's lines without comments and whitespace (so line wrapping does not matter): what
    an excerpt must match."""
    lines = []
    for line in text.split("\n"):
        line = line.split(comment, 1)[0] if comment else line
        line = "".join(line.split())
        if line and line != "...":
            lines.append(line)
    return lines


def check_excerpt(root, block):
    """An excerpt's lines (comments and `...` lines aside) appear in order in its file."""
    source = root / block.excerpt
    if not source.is_file():
        return f"excerpt={block.excerpt}: no such file"
    comment = {"cpp": "//", "python": "#", "sh": "#", "cmake": "#"}.get(block.lang, "")
    have = "".join(code_lines(source.read_text(encoding="utf-8"), comment))
    at = 0
    for line in code_lines(block.code, comment):
        found = have.find(line, at)
        if found < 0:
            return f"excerpt={block.excerpt}: this line is not in the file (in order): {line}"
        at = found + len(line)
    return None


def check_syntax(block):
    """A block that does not run still parses (Python, shell)."""
    if block.lang == "python":
        try:
            compile("\n" * (block.line - 1) + block.code, str(block.path), "exec")
        except SyntaxError as error:
            return f"a Python syntax error: {error}"
    if block.lang == "sh":
        done = subprocess.run(["bash", "-n"], input=block.code, text=True, capture_output=True)
        if done.returncode:
            return f"a shell syntax error: {done.stderr.strip()}"
    return None


def check(root):
    """Every fence well formed, every excerpt found, skipped blocks parse. Returns problems."""
    problems = []
    for chain in python_chains(root):
        if chain[0].mode == "continues":
            problems.append(f"{chain[0].where}: `continues` follows no runnable python block of "
                            "its file")
    for block in all_blocks(root):
        problems += [f"{block.where}: {p}" for p in block.problems]
        if block.problems:
            continue
        found = check_excerpt(root, block) if block.mode == "excerpt" else None
        if block.mode in ("partial", "no-run", "excerpt"):
            found = found or check_syntax(block)
        if found:
            problems.append(f"{block.where}: {found}")
    return problems


def python_chains(root):
    """Runnable Python blocks, each with the `continues` blocks after it: one script apiece."""
    chains = []
    for block in all_blocks(root):
        if block.lang != "python" or block.problems or block.mode not in ("", "continues"):
            continue
        if block.mode == "continues" and chains and chains[-1][-1].path == block.path:
            chains[-1].append(block)
        else:
            chains.append([block])
    return [c for c in chains if c]


DRIVER = """
import json, sys
namespace = {"__name__": "__main__"}
for path, line, code in json.load(sys.stdin):
    print(f"--- {path}:{line}", flush=True)
    exec(compile("\\n" * (line - 1) + code, path, "exec"), namespace)
"""


def run_python(root, python, build):
    """Runs each chain in a fresh interpreter in its own directory, the build's module first on
    PYTHONPATH; tracebacks name the Markdown file and line."""
    paths = [str(build.resolve() / "python")] if build else []
    paths += [str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(":") if p]
    env = dict(os.environ, PYTHONPATH=":".join(paths))
    failures = []
    for chain in python_chains(root):
        missing = missing_modules(python, env, "".join(b.code for b in chain))
        if missing:
            print(f"{chain[0].where}: skipped, {python} lacks {', '.join(missing)}")
            continue
        payload = json.dumps([[str(b.path.relative_to(root)), b.line, b.code] for b in chain])
        failures += run_one(chain[0], [python, "-c", DRIVER], payload, build, env)
    return failures


def missing_modules(python, env, code):
    """The optional modules (OPTIONAL_MODULES) that code imports and python cannot import."""
    wanted = [m for m in OPTIONAL_MODULES
              if re.search(rf"^\s*(import|from)\s+{m}\b", code, re.MULTILINE)]
    return [m for m in wanted if subprocess.run([python, "-c", f"import {m}"], env=env,
                                                capture_output=True).returncode]


def run_sh(root, build):
    return [f for b in all_blocks(root) if b.lang == "sh" and b.mode == "" and not b.problems
            for f in run_one(b, ["bash", "-euo", "pipefail"], b.code, build)]


def run_cpp(root, binaries):
    failures = []
    for block in all_blocks(root):
        if not compiles(block) or block.mode != "" or block.problems:
            continue
        if not re.search(r"\bint\s+main\s*\(", block.code):
            print(f"{block.where}: compiled (no main to run)")
            continue
        exe = binaries / cpp_name(block)
        if not exe.exists():
            failures.append(f"{block.where}: {exe} was not built (build the target, or "
                            "reconfigure after editing the docs)")
            continue
        failures += run_one(block, [str(exe)], "", None)
    return failures


def run_one(block, command, stdin, build, env=None):
    """Runs one block in a fresh directory (removed when it passes) in which build/release is
    the build under test, as the README's commands name it; returns its failure, if any."""
    cwd = Path(tempfile.mkdtemp(prefix=cpp_name(block) + "_"))
    if build:
        (cwd / "build").mkdir()
        (cwd / "build" / "release").symlink_to(build.resolve())
    began = time.monotonic()
    try:
        done = subprocess.run(command, input=stdin, text=True, capture_output=True, cwd=cwd,
                              timeout=BLOCK_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        return [f"{block.where}: still running after {BLOCK_TIMEOUT_S} s (in {cwd})"]
    took = time.monotonic() - began
    if done.returncode:
        return [f"{block.where}: exit {done.returncode} after {took:.1f} s (in {cwd})\n"
                f"--- stdout:\n{done.stdout[-6000:]}\n--- stderr:\n{done.stderr[-6000:]}"]
    shutil.rmtree(cwd, ignore_errors=True)
    print(f"{block.where}: ran ({took:.1f} s)")
    return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["extract-cpp", "check", "python", "sh", "cpp"])
    parser.add_argument("dir", nargs="?", help="extract-cpp: where to write; cpp: the binaries")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2])
    parser.add_argument("--build", type=Path, help="the build under test (sh, python)")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    root = args.root.resolve()
    if args.command == "extract-cpp":
        extract_cpp(root, Path(args.dir))
        return 0
    if args.command == "check":
        failures = check(root)
    elif args.command == "cpp":
        failures = check(root) + run_cpp(root, Path(args.dir))
    elif args.command == "python":
        failures = run_python(root, args.python, args.build)
    else:
        failures = run_sh(root, args.build)
    for failure in failures:
        print(f"FAILED {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
