"""Builds the weft extension with the project's CMake (static libweft linked into weft/_weft.so,
so the installed package needs no other Weft file) and packages python/weft around it.

    python3 -m pip install --no-build-isolation .      # into a venv (--system-site-packages)

WEFT_CMAKE_ARGS adds CMake arguments (e.g. "-DWEFT_WITH_CUDA=ON"); WEFT_BUILD_DIR names the
build folder (default build/pip, reused between installs)."""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = Path(os.environ.get("WEFT_BUILD_DIR", ROOT / "build" / "pip")).resolve()
        args = [
            "-G", "Ninja",
            "-DCMAKE_BUILD_TYPE=Release",
            "-DBUILD_SHARED_LIBS=OFF",
            "-DCMAKE_POSITION_INDEPENDENT_CODE=ON",
            "-DWEFT_BUILD_PYTHON=ON",
            "-DWEFT_BUILD_TESTS=OFF",
            "-DWEFT_BUILD_BENCHMARKS=OFF",
            "-DWEFT_BUILD_TOOLS=OFF",
            "-DWEFT_BUILD_EXAMPLES=OFF",
            f"-DPython_EXECUTABLE={sys.executable}",
        ] + shlex.split(os.environ.get("WEFT_CMAKE_ARGS", ""))
        if shutil.which("ninja") is None:
            args = args[2:]
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build_dir)] + args, check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "weft_python"], check=True)
        built = sorted((build_dir / "python" / "weft").glob("_weft*.so"))
        if not built:
            raise RuntimeError(f"the CMake build made no weft/_weft*.so under {build_dir}")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)


setup(
    packages=["weft"],
    package_dir={"weft": "python/weft"},
    ext_modules=[Extension("weft._weft", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
