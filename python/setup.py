"""Builds and installs the tiergnn package with Debian's setuptools:

    pip install ./python --no-build-isolation      # from the repository's root

The C parts are the project's CMake build (CMakeLists.txt, the "Python package" section):
this script configures it in a build directory of its own (build-pip/ at the repository's
root, ignored by git), builds its `python` target - libtiergnn.so, made position-independent
from the library's sources, and one extension module tiergnn._NAME per python/src/_NAME.c - and
copies them beside the package's .py files; the extension modules find libtiergnn.so there
($ORIGIN). It needs what `make deps` installs: cmake, gcc, liburing-dev, libopenblas-dev,
zlib1g-dev, python3-dev and python3-numpy (libmetis-dev where present). `make python` builds the
same package into build/python/ without installing it.
"""

import glob
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD_BASE = os.path.join(ROOT, "build-pip")


def module_names():
    """tiergnn._NAME for every python/src/_NAME.c (_NAME_PART.c files are parts of _NAME)."""
    names = []
    for path in sorted(glob.glob(os.path.join(HERE, "src", "_*.c"))):
        base = os.path.basename(path)[:-2]
        if "_" not in base[1:]:
            names.append("tiergnn." + base)
    return names


class CMakeBuildExt(build_ext):
    """build_ext through CMake: the modules and libtiergnn.so as `make python` builds them."""

    def run(self):
        cmake_dir = os.path.join(BUILD_BASE, "cmake")
        pkg_dir = os.path.join(cmake_dir, "python", "tiergnn")
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.check_call(["cmake", "-S", ROOT, "-B", cmake_dir, "-DCMAKE_BUILD_TYPE=Release",
                               "-DPython3_EXECUTABLE=" + sys.executable,
                               "-DTG_PYTHON_DIR=" + os.path.dirname(pkg_dir)])
        subprocess.check_call(["cmake", "--build", cmake_dir, "--target", "python", "-j", jobs])
        for ext in self.extensions:
            built = os.path.join(pkg_dir, os.path.basename(self.get_ext_filename(ext.name)))
            dest = self.get_ext_fullpath(ext.name)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copyfile(built, dest)
        lib = os.path.join(pkg_dir, "libtiergnn.so")
        shutil.copyfile(lib, os.path.join(os.path.dirname(dest), "libtiergnn.so"))


os.chdir(HERE)  # setuptools wants the package's paths relative to setup.py's directory
setup(
    name="tiergnn",
    version="0.1.0",
    description="tiergnn's out-of-core GNN loader and trainer for PyTorch models",
    packages=["tiergnn"],
    ext_modules=[Extension(name, sources=[]) for name in module_names()],
    cmdclass={"build_ext": CMakeBuildExt},
    options={"build": {"build_base": BUILD_BASE}, "egg_info": {"egg_base": BUILD_BASE}},
    python_requires=">=3.9",
    install_requires=["numpy"],
    zip_safe=False,
)
