"""What this build is, from Python: weft.__version__ is the project's version and
weft.build_commit the source tree's `git describe --always --dirty` when the module was built
(cmake/write_build_commit.cmake), whatever the current directory is."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import weft

SOURCE = Path(__file__).resolve().parents[2]


def git(*args):
    return subprocess.run(["git", "-C", str(SOURCE), *args], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_version_is_the_projects():
    project = (SOURCE / "CMakeLists.txt").read_text()
    assert weft.__version__ == re.search(r"project\(weft VERSION ([0-9.]+)", project).group(1)


def test_build_commit_is_the_source_trees_at_build_time():
    if shutil.which("git") is None:
        pytest.skip("no git")
    try:
        top = Path(git("rev-parse", "--show-toplevel")).resolve()
    except subprocess.CalledProcessError:
        top = None
    if top != SOURCE:
        assert weft.build_commit == "unknown"
        return
    assert weft.build_commit == git("describe", "--always", "--dirty")
