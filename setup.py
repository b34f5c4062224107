"""Builds baton's Python package against the libbaton that is installed (pyproject.toml).

The extension baton._baton is compiled here, against the libbaton that
`make install` put down and pkg-config finds (baton.pc), the way mpi4py and
h5py build against the system's MPI and HDF5: its compiler and linker flags
(MPI's and Boost.Log's included) come from `pkg-config --cflags --libs baton`,
and the module finds libbaton.so at run time through an rpath to
`pkg-config --variable=libdir baton`. Nothing else is built: no second copy
of libbaton goes into the wheel.

The extension also uses three headers of baton's MPI runtime that are not
public API (mpi_runtime/: deadlines, the MPI check, the agreed stop); `make
install` puts them in `pkg-config --variable=internal_includedir baton`.
Since they are not a stable interface, the package builds only against the
libbaton of its own version.

Environment: PKG_CONFIG (the pkg-config program), PKG_CONFIG_PATH (where
baton.pc is, e.g. /usr/local/lib/pkgconfig, already searched when the prefix
is /usr/local), BATON_DLPACK_INCLUDE (a directory holding dlpack/dlpack.h, if
the compiler does not find it: Debian's libdlpack-dev puts it in
/usr/include), BATON_BUILD_JOBS (how many of the extension's sources are
compiled at once; default: one per CPU, as pybind11's ParallelCompile does:
setuptools alone compiles them one after the other).
"""

import os
import shlex
import shutil
import subprocess
import sys

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
VERSION = "0.1.0"  # = AC_INIT's in configure.ac (tests/install/test_pip_install.sh checks it)

SOURCES = [
    "python/src/array_view.cc",
    "python/src/bench_binding.cc",
    "python/src/checkpointer_binding.cc",
    "python/src/deadline_collectives.cc",
    "python/src/errors.cc",
    "python/src/module.cc",
    "python/src/results.cc",
    "python/src/runtime_binding.cc",
]


class MissingDependency(SystemExit):
    """Ends the build with one message that names what is missing and how to get it."""

    def __init__(self, text):
        super().__init__("\nbaton: cannot build the Python package: " + text + "\n")


def pkg_config(*args):
    exe = os.environ.get("PKG_CONFIG", "pkg-config")
    if shutil.which(exe) is None:
        raise MissingDependency(
            f"the program '{exe}' is not found (PKG_CONFIG names it); install pkg-config "
            "(Debian: apt-get install pkg-config), which finds the installed libbaton through baton.pc")
    proc = subprocess.run([exe, *args, "baton"], capture_output=True, text=True)
    if proc.returncode != 0:
        where = os.environ.get("PKG_CONFIG_PATH", "")
        raise MissingDependency(
            "libbaton is not installed where pkg-config looks: `" + " ".join([exe, *args, "baton"]) + "` said: "
            + (proc.stderr.strip() or f"exit {proc.returncode}") + "\n"
            "Install the C++ library first (in baton's source tree: ./configure && make && make install; "
            "docs/python.md, 'Install'), and if its prefix is not /usr/local or /usr, point PKG_CONFIG_PATH "
            "at <prefix>/lib/pkgconfig (now " + (f"'{where}'" if where else "unset") + ").")
    return proc.stdout.strip()


def baton_flags():
    installed = pkg_config("--modversion")
    if installed != VERSION:
        raise MissingDependency(
            f"the installed libbaton is version {installed} (pkg-config --modversion baton) and this package "
            f"is {VERSION}: the extension uses headers of libbaton that are not public API, so both must be of "
            f"the same version; install libbaton {VERSION} or the package of version {installed}")
    internal = pkg_config("--variable=internal_includedir")
    if not internal or not os.path.isfile(os.path.join(internal, "mpi_runtime", "deadline.h")):
        raise MissingDependency(
            f"libbaton {installed} is installed without the headers its Python extension needs "
            f"({internal or 'no internal_includedir in baton.pc'}/mpi_runtime/deadline.h); "
            "reinstall it from baton's source tree with `make install`")
    libdir = pkg_config("--variable=libdir")
    return shlex.split(pkg_config("--cflags")), shlex.split(pkg_config("--libs")), internal, libdir


def dlpack_include():
    """A directory for -I that holds dlpack/dlpack.h, or None when the compiler finds it itself."""
    given = os.environ.get("BATON_DLPACK_INCLUDE")
    if given:
        if not os.path.isfile(os.path.join(given, "dlpack", "dlpack.h")):
            raise MissingDependency(f"BATON_DLPACK_INCLUDE={given} holds no dlpack/dlpack.h")
        return given
    for d in ("/usr/include", "/usr/local/include", os.path.join(sys.prefix, "include")):
        if os.path.isfile(os.path.join(d, "dlpack", "dlpack.h")):
            return None if d in ("/usr/include", "/usr/local/include") else d
    raise MissingDependency(
        "DLPack's header dlpack/dlpack.h is not found (in /usr/include, /usr/local/include or "
        f"{sys.prefix}/include); install it (Debian: apt-get install libdlpack-dev; conda: dlpack) or set "
        "BATON_DLPACK_INCLUDE to the directory that holds dlpack/dlpack.h")


class BuildExt(build_ext):
    """Asks pkg-config when the extension is built (not when the sdist is made: that needs no libbaton)."""

    def build_extensions(self):
        cflags, libs, internal, libdir = baton_flags()
        dlpack = dlpack_include()
        for ext in self.extensions:
            # The installed private headers first: in a source tree, HERE also
            # holds mpi_runtime/, which must not shadow the installed library's.
            ext.include_dirs = [internal] + ([dlpack] if dlpack else []) + [HERE] + ext.include_dirs
            ext.extra_compile_args += cflags + ["-fvisibility=hidden"]
            ext.extra_link_args += libs + [f"-Wl,-rpath,{libdir}"]
        super().build_extensions()


# pybind11's helper: the sources of one extension compiled in parallel (setuptools compiles them
# one at a time); BATON_BUILD_JOBS=N caps it, unset or 0 is one per CPU.
ParallelCompile("BATON_BUILD_JOBS").install()

setup(
    version=VERSION,
    ext_modules=[Pybind11Extension("baton._baton", SOURCES, cxx_std=17)],
    cmdclass={"build_ext": BuildExt},
)
