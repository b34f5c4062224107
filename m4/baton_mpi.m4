# baton_mpi.m4 -- BATON_CHECK_MPI
#
# Checks for Open MPI (required): the flags from MPI_CFLAGS/MPI_LIBS when
# given, else pkg-config ompi-c (PKG_CHECK_MODULES), else the mpicxx wrapper
# (`mpicxx --showme:compile` / `--showme:link`); mpirun; an Open MPI mpi.h
# (OMPI_MAJOR_VERSION) and a g++ link test of MPI_Init_thread.
#
# Option:   --with-mpi=PATH   Open MPI prefix containing bin/mpicxx (its
#                             wrapper then, not pkg-config; MPICXX=... honoured)
# AC_SUBST: MPIRUN MPI_CFLAGS MPI_LIBS
# Defines:  BATON_OMPI_SYSCONFDIR (string: Open MPI's sysconfdir from `ompi_info --path sysconfdir`,
#           empty when ompi_info is not found; mpi_runtime/open_mpi_mtl.h reads its parameter files)
# Shell:    BATON_MPI_PC (ompi-c when pkg-config gave the flags, for baton.pc's
#           Requires; empty otherwise), baton_summary_mpi  e.g. "Open MPI 4.1.4 (via pkg-config ompi-c)"
AC_DEFUN([BATON_CHECK_MPI], [
AC_REQUIRE([PKG_PROG_PKG_CONFIG])
AC_ARG_WITH([mpi],
  [AS_HELP_STRING([--with-mpi=PATH],
    [Open MPI install prefix containing bin/mpicxx (default: search PATH)])],
  [], [with_mpi=check])
m4_define([_BATON_MPI_HINT],
  [install the Debian packages libopenmpi-dev and openmpi-bin, or use --with-mpi=PATH (Open MPI prefix containing bin/mpicxx)])
AC_ARG_VAR([MPI_CFLAGS], [C++ compiler flags for Open MPI, overriding pkg-config ompi-c and mpicxx --showme])
AC_ARG_VAR([MPI_LIBS], [linker flags for Open MPI, overriding pkg-config ompi-c and mpicxx --showme])
BATON_MPI_PC=
AS_CASE([$with_mpi],
  [no], [AC_MSG_ERROR([MPI is required; --without-mpi is not supported])],
  [yes|check], [baton_mpi_path=$PATH baton_mpi_where='your PATH'],
  [AS_IF([test -d "$with_mpi/bin"], [],
     [AC_MSG_ERROR([--with-mpi=$with_mpi: directory $with_mpi/bin does not exist])])
   baton_mpi_path="$with_mpi/bin" baton_mpi_where="$with_mpi/bin"])
AC_PATH_PROGS([MPIRUN], [mpirun mpiexec], [], [$baton_mpi_path$PATH_SEPARATOR$PATH])
AS_IF([test -z "$MPIRUN"],
  [AC_MSG_WARN([mpirun not found (Debian package openmpi-bin); MPI tests will not be able to run])])

dnl The flags: MPI_CFLAGS/MPI_LIBS when given; else (no --with-mpi=PATH)
dnl pkg-config ompi-c; else the mpicxx wrapper's --showme.
AS_IF([test -n "$MPI_CFLAGS" && test -n "$MPI_LIBS"], [baton_mpi_where="MPI_CFLAGS/MPI_LIBS"],
  [AS_CASE([$with_mpi], [yes|check],
     [PKG_CHECK_MODULES([MPI], [ompi-c], [baton_mpi_where="pkg-config ompi-c" BATON_MPI_PC=ompi-c], [:])])])
AS_IF([test -z "$BATON_MPI_PC" && test "$baton_mpi_where" != "MPI_CFLAGS/MPI_LIBS"], [
  AC_PATH_PROGS([MPICXX], [mpicxx mpic++ mpiCC], [], [$baton_mpi_path])
  AS_IF([test -z "$MPICXX"],
    [AC_MSG_ERROR([neither pkg-config ompi-c nor the MPI C++ compiler wrapper mpicxx (in $baton_mpi_where) was found; _BATON_MPI_HINT])])
  AC_MSG_CHECKING([for Open MPI flags from $MPICXX --showme])
  AS_IF([baton_mpi_cflags=`$MPICXX --showme:compile 2>/dev/null` &&
         baton_mpi_lflags=`$MPICXX --showme:link 2>/dev/null`], [AC_MSG_RESULT([ok])],
    [AC_MSG_RESULT([failed])
     baton_mpi_show=`$MPICXX -show 2>/dev/null || $MPICXX --version 2>&1 | sed 1q`
     AC_MSG_ERROR([$MPICXX is not an Open MPI wrapper (--showme:compile failed; it reports: $baton_mpi_show). baton requires Open MPI: _BATON_MPI_HINT])])
  dnl Open MPI's C++ bindings (-lmpi_cxx) are not used (OMPI_SKIP_MPICXX).
  MPI_CFLAGS= MPI_LIBS=
  MPI_CFLAGS=$baton_mpi_cflags
  for baton_f in $baton_mpi_lflags; do
    AS_CASE([$baton_f], [-lmpi_cxx], [], [MPI_LIBS="$MPI_LIBS $baton_f"])
  done
  MPI_CFLAGS=`echo $MPI_CFLAGS`
  MPI_LIBS=`echo $MPI_LIBS`
  baton_mpi_where=$MPICXX])
AM_SUBST_NOTMAKE([MPICXX])

baton_save_CPPFLAGS=$CPPFLAGS baton_save_LDFLAGS=$LDFLAGS baton_save_LIBS=$LIBS
dnl baton uses the C API only (OMPI_SKIP_MPICXX, as in Makefile.am), so no -lmpi_cxx.
CPPFLAGS="$CPPFLAGS -DOMPI_SKIP_MPICXX=1 $MPI_CFLAGS" LIBS="$MPI_LIBS $LIBS"
AC_MSG_CHECKING([whether mpi.h is Open MPI's])
AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#ifndef OMPI_MAJOR_VERSION
#error not Open MPI
#endif]], [[]])], [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>
#ifndef MPICH_VERSION
#error not MPICH
#endif]], [[]])], [baton_mpi_found="an MPICH-based MPI (MPICH/MVAPICH/Intel MPI)"],
     [AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]], [[]])],
        [baton_mpi_found="an unknown MPI implementation"], [baton_mpi_found="no usable mpi.h"])])
   AC_MSG_ERROR([baton requires Open MPI, but $baton_mpi_where provides $baton_mpi_found (MPI_CFLAGS: $MPI_CFLAGS); _BATON_MPI_HINT])])
AC_MSG_CHECKING([for MPI_Init_thread with g++ and the Open MPI flags])
AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
  [[int provided = 0; MPI_Init_thread(0, 0, MPI_THREAD_MULTIPLE, &provided); MPI_Finalize();]])],
  [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_MSG_ERROR([cannot link an MPI program with $CXX $MPI_CFLAGS $MPI_LIBS (see config.log); _BATON_MPI_HINT])])
AC_COMPUTE_INT([baton_ompi_major], [OMPI_MAJOR_VERSION], [[#include <mpi.h>]], [baton_ompi_major=?])
AC_COMPUTE_INT([baton_ompi_minor], [OMPI_MINOR_VERSION], [[#include <mpi.h>]], [baton_ompi_minor=?])
AC_COMPUTE_INT([baton_ompi_release], [OMPI_RELEASE_VERSION], [[#include <mpi.h>]], [baton_ompi_release=?])
CPPFLAGS=$baton_save_CPPFLAGS LDFLAGS=$baton_save_LDFLAGS LIBS=$baton_save_LIBS
dnl Where this Open MPI reads its parameter files (mpi_runtime/open_mpi_mtl.h):
dnl the ompi_info beside the mpirun found, else on the PATH.
AC_PATH_PROGS([OMPI_INFO], [ompi_info], [], [`AS_DIRNAME(["${MPIRUN:-/nonexistent/mpirun}"])`$PATH_SEPARATOR$baton_mpi_path$PATH_SEPARATOR$PATH])
baton_ompi_sysconfdir=
AS_IF([test -n "$OMPI_INFO"],
  [baton_ompi_sysconfdir=`$OMPI_INFO --path sysconfdir --parsable 2>/dev/null | sed -n 's/^path:sysconfdir://p'`])
AC_MSG_CHECKING([for Open MPI's sysconfdir])
AC_MSG_RESULT([${baton_ompi_sysconfdir:-unknown (no ompi_info): baton leaves Open MPI's mtl setting alone}])
AC_DEFINE_UNQUOTED([BATON_OMPI_SYSCONFDIR], ["$baton_ompi_sysconfdir"],
  [Open MPI's sysconfdir (its parameter files), empty when unknown.])
baton_summary_mpi="Open MPI $baton_ompi_major.$baton_ompi_minor.$baton_ompi_release (via $baton_mpi_where)"
AC_SUBST([MPIRUN])
])
