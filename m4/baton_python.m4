# baton_python.m4 -- BATON_CHECK_PYTHON
#
# The Python extension baton._baton (python/): an interpreter with its
# development headers, pybind11 (>= 2.6) and DLPack's header (dlpack/dlpack.h,
# Debian: libdlpack-dev). Optional: on when everything is found.
#
# Options:  --with-python=PATH|yes|no  the interpreter (default: the virtual
#                                      environment scripts/install-deps --with-torch
#                                      makes, $BATON_VENV or /opt/baton-venv: torch 2
#                                      from PyPI beside Debian's numpy, mpi4py and h5py;
#                                      else /usr/bin/python3, else python3 on PATH)
#           --disable-python           the same as --without-python
#           --with-pythondir=DIR       where `make install` puts the package
#                                      (default: the entry of the interpreter's
#                                      sys.path under the prefix, see below)
# A PATH or yes that is unusable is an error; the default (auto) turns the
# extension off with the reason in the summary.
#
# Install directory: automake's AM_PATH_PYTHON asks sysconfig's default scheme,
# which on Debian's Python 3.11 (posix_local) gives <prefix>/local/lib/...,
# a directory no interpreter reads. Instead: the first entry of the
# interpreter's sys.path that lies under the prefix and ends in -packages
# (/usr/local -> /usr/local/lib/python3.11/dist-packages, /usr ->
# /usr/lib/python3/dist-packages), else sysconfig's posix_prefix purelib
# (<prefix>/lib/python3.X/site-packages; the summary then says that it is not
# on sys.path and PYTHONPATH must name it).
#
# AC_SUBST: PYTHON, PYTHON_CPPFLAGS (-isystem: Python's headers are not
#           -Wundef clean), PYBIND11_CPPFLAGS, PYTHON_EXT_SUFFIX, pythondir,
#           pyexecdir (AM_PATH_PYTHON, then overridden as above)
# Defines:  AM_CONDITIONAL BATON_HAVE_PYTHON
# Shell:    baton_have_python=yes|no, baton_summary_python
AC_DEFUN([BATON_CHECK_PYTHON], [
AC_REQUIRE([PKG_PROG_PKG_CONFIG])
AC_ARG_WITH([python],
  [AS_HELP_STRING([--with-python=PATH|yes|no],
    [the Python 3 interpreter the extension baton._baton is built for (default: auto: /opt/baton-venv/bin/python (torch 2, made by scripts/install-deps --with-torch), else /usr/bin/python3, else python3)])],
  [], [with_python=auto])
AC_ARG_ENABLE([python],
  [AS_HELP_STRING([--disable-python], [do not build the Python extension])],
  [AS_IF([test "x$enableval" = xno], [with_python=no])], [])
AC_ARG_WITH([pythondir],
  [AS_HELP_STRING([--with-pythondir=DIR], [install the Python package baton into DIR (default: the sys.path entry under the prefix)])],
  [], [with_pythondir=])
m4_define([_BATON_PYTHON_HINT],
  [install the Debian packages python3-dev pybind11-dev libdlpack-dev (scripts/install-deps), or use --without-python])
baton_have_python=no baton_python_why=
AS_CASE([$with_python],
  [no], [baton_python_why="disabled by --without-python" PYTHON=:],
  [auto|yes], [AS_IF([test -n "$PYTHON"], [],
                 [test -x "${BATON_VENV:-/opt/baton-venv}/bin/python"], [PYTHON=${BATON_VENV:-/opt/baton-venv}/bin/python],
                 [test -x /usr/bin/python3], [PYTHON=/usr/bin/python3],
                 [AC_PATH_PROG([PYTHON], [python3], [])])
               AS_IF([test -z "$PYTHON"], [baton_python_why="no python3 found"])],
  [PYTHON=$with_python
   AS_IF([test -x "$PYTHON"], [], [AC_MSG_ERROR([--with-python=$with_python: not an executable file])])])
dnl AM_PATH_PYTHON must be expanded unconditionally (the PYTHON primary needs
dnl it); with nothing found it is told to accept anything and not fail.
dnl No version argument: with one, AM_PATH_PYTHON fails on a PYTHON it finds too old.
AS_IF([test -z "$PYTHON"], [PYTHON=:])
AM_PATH_PYTHON([], [], [:])
AS_IF([test -z "$baton_python_why"], [
  AC_MSG_CHECKING([whether $PYTHON is Python >= 3.7])
  AS_IF([$PYTHON -c 'import sys; sys.exit(sys.version_info < (3, 7))' 2>/dev/null],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no]); baton_python_why="$PYTHON is not Python >= 3.7"])])

PYTHON_CPPFLAGS= PYBIND11_CPPFLAGS= PYTHON_EXT_SUFFIX=
AS_IF([test -z "$baton_python_why"], [
  AC_MSG_CHECKING([for the development headers of $PYTHON])
  baton_py_inc=`$PYTHON -c 'import sysconfig; print(sysconfig.get_paths()[["include"]])' 2>/dev/null`
  AS_IF([test -n "$baton_py_inc" && test -f "$baton_py_inc/Python.h"],
    [AC_MSG_RESULT([$baton_py_inc])
     PYTHON_CPPFLAGS="-isystem $baton_py_inc"],
    [AC_MSG_RESULT([no])
     baton_python_why="no Python.h for $PYTHON (looked in ${baton_py_inc:-its sysconfig include path})"])])
AS_IF([test -z "$baton_python_why"], [
  dnl pybind11: its pkg-config file (Debian's pybind11-dev), else the pybind11
  dnl Python package's include directory.
  PKG_CHECK_MODULES([PYBIND11], [pybind11 >= 2.6],
    [baton_pybind11_ver=`$PKG_CONFIG --modversion pybind11`
     PYBIND11_CPPFLAGS=`echo $PYBIND11_CFLAGS | sed 's/-I/-isystem /g'`],
    [baton_pybind11_inc=`$PYTHON -c 'import pybind11; print(pybind11.get_include())' 2>/dev/null`
     baton_pybind11_ver=`$PYTHON -c 'import pybind11; print(pybind11.__version__)' 2>/dev/null`
     AS_IF([test -n "$baton_pybind11_inc"], [PYBIND11_CPPFLAGS="-isystem $baton_pybind11_inc"])])
  baton_save_CPPFLAGS=$CPPFLAGS
  CPPFLAGS="$CPPFLAGS $PYTHON_CPPFLAGS $PYBIND11_CPPFLAGS"
  AC_MSG_CHECKING([for pybind11/pybind11.h (>= 2.6)])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <pybind11/pybind11.h>
#if PYBIND11_VERSION_MAJOR < 2 || (PYBIND11_VERSION_MAJOR == 2 && PYBIND11_VERSION_MINOR < 6)
#error pybind11 too old
#endif]], [[]])], [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     baton_python_why="pybind11 >= 2.6 not found (pybind11/pybind11.h)"])
  AS_IF([test -z "$baton_python_why"], [
    AC_MSG_CHECKING([for dlpack/dlpack.h])
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <dlpack/dlpack.h>]], [[DLManagedTensor t; (void)t;]])],
      [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no]); baton_python_why="DLPack's header dlpack/dlpack.h not found"])])
  CPPFLAGS=$baton_save_CPPFLAGS])

AS_IF([test -z "$baton_python_why"], [
  PYTHON_EXT_SUFFIX=`$PYTHON -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX") or ".so")'`
  AS_IF([test -n "$with_pythondir"],
    [baton_pydir=$with_pythondir baton_pydir_note="--with-pythondir"],
    [baton_py_prefix=$prefix
     test "x$baton_py_prefix" = xNONE && baton_py_prefix=$ac_default_prefix
     dnl Relative to the prefix, so that `make install prefix=...` and distcheck follow.
     baton_py_rel=`$PYTHON -c "
import sys, sysconfig
prefix = '$baton_py_prefix'.rstrip('/') + '/'
for p in sys.path:
    if p.startswith(prefix) and p.endswith('-packages'):
        print('on sys.path', p[[len(prefix):]]); break
else:
    p = sysconfig.get_path('purelib', 'posix_prefix', vars={'base': prefix.rstrip('/')})
    print('NOT on sys.path: add it to PYTHONPATH', p[[len(prefix):]])
" 2>/dev/null`
     AS_IF([test -z "$baton_py_rel"], [AC_MSG_ERROR([cannot ask $PYTHON for its sys.path (run it to see why)])])
     baton_pydir_note=`echo "$baton_py_rel" | sed 's/ [[^ ]]*$//'`
     baton_py_rel=`echo "$baton_py_rel" | sed 's/.* //'`
     baton_pydir="\${prefix}/$baton_py_rel"])
  pythondir=$baton_pydir
  pyexecdir=`echo "$baton_pydir" | sed 's/^\${prefix}/${exec_prefix}/'`
  baton_have_python=yes
  dnl torch is optional at build time; the summary names the one the tests will use.
  baton_py_torch=`$PYTHON -c 'import torch; print("torch " + torch.__version__)' 2>/dev/null || echo "no torch: scripts/install-deps --with-torch"`
  baton_summary_python="$PYTHON $PYTHON_VERSION ($baton_py_torch), pybind11 $baton_pybind11_ver, into $pythondir ($baton_pydir_note)"],
  [AS_CASE([$with_python],
     [auto|no], [AS_IF([test "$with_python" = auto],
                  [AC_MSG_NOTICE([building without the Python extension: $baton_python_why; _BATON_PYTHON_HINT])])],
     [AC_MSG_ERROR([the Python extension was requested (--with-python=$with_python) but $baton_python_why; _BATON_PYTHON_HINT])])
   baton_summary_python="no ($baton_python_why)"])
AM_CONDITIONAL([BATON_HAVE_PYTHON], [test "$baton_have_python" = yes])
AC_SUBST([PYTHON_CPPFLAGS])
AC_SUBST([PYBIND11_CPPFLAGS])
AC_SUBST([PYTHON_EXT_SUFFIX])
AC_SUBST([pythondir])
AC_SUBST([pyexecdir])
])
