# baton_hdf5.m4 -- BATON_CHECK_HDF5
#
# Checks for parallel HDF5 (required): H5_HAVE_PARALLEL must be defined and
# H5Pset_fapl_mpio must link (with the MPI flags from BATON_CHECK_MPI).
# Also looks for h5dump (needed by the tests only: warning if missing).
#
# Option:   --with-hdf5=PATH  HDF5 prefix (PATH/include, PATH/lib)
#           default: HDF5_CFLAGS/HDF5_LIBS when given, else pkg-config
#           hdf5-openmpi / hdf5-mpi (PKG_CHECK_MODULES), then the Debian path
#           /usr/include/hdf5/openmpi, then the default paths.
# AC_SUBST: HDF5_CFLAGS HDF5_LIBS (PKG_CHECK_MODULES), H5DUMP
# Shell:    BATON_HDF5_PC (the pkg-config module found, for baton.pc; empty if none)
# Shell:    baton_summary_hdf5  e.g. "HDF5 1.10.8 parallel (/usr/include/hdf5/openmpi/hdf5.h, via pkg-config hdf5-openmpi)"
AC_DEFUN([BATON_CHECK_HDF5], [
AC_REQUIRE([BATON_CHECK_MPI])
AC_REQUIRE([PKG_PROG_PKG_CONFIG])
AC_ARG_WITH([hdf5],
  [AS_HELP_STRING([--with-hdf5=PATH],
    [parallel HDF5 install prefix (default: pkg-config hdf5-openmpi, then system paths)])],
  [], [with_hdf5=check])
m4_define([_BATON_HDF5_HINT],
  [install the Debian package libhdf5-openmpi-dev, or use --with-hdf5=PATH])
baton_hdf5_where="default compiler paths"
baton_hdf5_ma=`$CXX -print-multiarch 2>/dev/null`
BATON_HDF5_PC=
AS_CASE([$with_hdf5],
  [no], [AC_MSG_ERROR([HDF5 is required; --without-hdf5 is not supported])],
  [yes|check], [
    dnl HDF5_CFLAGS and HDF5_LIBS given on the command line win over pkg-config.
    AS_IF([test -n "$HDF5_CFLAGS" && test -n "$HDF5_LIBS"], [baton_hdf5_given=yes], [baton_hdf5_given=no])
    PKG_CHECK_MODULES([HDF5], [hdf5-openmpi],
      [AS_IF([test $baton_hdf5_given = yes], [baton_hdf5_where="HDF5_CFLAGS/HDF5_LIBS"],
         [baton_hdf5_where="pkg-config hdf5-openmpi" BATON_HDF5_PC=hdf5-openmpi])],
      [PKG_CHECK_MODULES([HDF5], [hdf5-mpi],
        [baton_hdf5_where="pkg-config hdf5-mpi" BATON_HDF5_PC=hdf5-mpi],
        [AS_IF([test -f /usr/include/hdf5/openmpi/hdf5.h], [
           HDF5_CFLAGS=-I/usr/include/hdf5/openmpi
           HDF5_LIBS="-L/usr/lib/$baton_hdf5_ma/hdf5/openmpi -lhdf5"
           baton_hdf5_where=/usr/include/hdf5/openmpi],
          [HDF5_CFLAGS= HDF5_LIBS=-lhdf5])])])],
  [AS_IF([test -d "$with_hdf5"], [],
     [AC_MSG_ERROR([--with-hdf5=$with_hdf5: directory does not exist (expected a parallel HDF5 prefix with include/hdf5.h and lib/libhdf5.so)])])
   AS_IF([test -f "$with_hdf5/include/hdf5.h"], [],
     [AC_MSG_ERROR([--with-hdf5=$with_hdf5: $with_hdf5/include/hdf5.h not found])])
   baton_hdf5_libdir="$with_hdf5/lib"
   for baton_d in "$with_hdf5/lib" "$with_hdf5/lib64" "$with_hdf5/lib/$baton_hdf5_ma"; do
     AS_IF([test -f "$baton_d/libhdf5.so" || test -f "$baton_d/libhdf5.a"], [baton_hdf5_libdir=$baton_d; break])
   done
   HDF5_CFLAGS="-I$with_hdf5/include"
   HDF5_LIBS="-L$baton_hdf5_libdir -Wl,-rpath,$baton_hdf5_libdir -lhdf5"
   baton_hdf5_where=$with_hdf5])

baton_save_CPPFLAGS=$CPPFLAGS baton_save_LDFLAGS=$LDFLAGS baton_save_LIBS=$LIBS
CPPFLAGS="$CPPFLAGS -DOMPI_SKIP_MPICXX=1 $HDF5_CFLAGS $MPI_CFLAGS"
AC_MSG_CHECKING([for H5pubconf.h])
AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <H5pubconf.h>]], [[]])], [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_MSG_ERROR([HDF5 headers (H5pubconf.h, hdf5.h) not found (looked in: $baton_hdf5_where); _BATON_HDF5_HINT])])
AC_MSG_CHECKING([whether HDF5 is built with parallel (MPI-IO) support])
AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <H5pubconf.h>
#ifndef H5_HAVE_PARALLEL
#error serial HDF5
#endif]], [[]])], [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_MSG_ERROR([the HDF5 found ($baton_hdf5_where) is a serial build (H5_HAVE_PARALLEL not defined); baton needs parallel HDF5: install libhdf5-openmpi-dev, or use --with-hdf5=PATH to point at a parallel HDF5 built with Open MPI])])
LIBS="$HDF5_LIBS $MPI_LIBS $LIBS"
AC_MSG_CHECKING([for H5Pset_fapl_mpio])
AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <hdf5.h>]],
  [[hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL); H5Pclose(fapl);]])],
  [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_MSG_ERROR([cannot link H5Pset_fapl_mpio with $HDF5_LIBS (see config.log); _BATON_HDF5_HINT])])
AC_COMPUTE_INT([baton_h5_major], [H5_VERS_MAJOR], [[#include <hdf5.h>]], [baton_h5_major=?])
AC_COMPUTE_INT([baton_h5_minor], [H5_VERS_MINOR], [[#include <hdf5.h>]], [baton_h5_minor=?])
AC_COMPUTE_INT([baton_h5_release], [H5_VERS_RELEASE], [[#include <hdf5.h>]], [baton_h5_release=?])
baton_hdf5_h=`echo '#include <hdf5.h>' | $CXX -E $CPPFLAGS -x c++ - 2>/dev/null | sed -n 's|^# .* "\(/.*/hdf5\.h\)".*|\1|p' | sed 1q`
CPPFLAGS=$baton_save_CPPFLAGS LDFLAGS=$baton_save_LDFLAGS LIBS=$baton_save_LIBS
baton_summary_hdf5="HDF5 $baton_h5_major.$baton_h5_minor.$baton_h5_release parallel ($baton_hdf5_h, via $baton_hdf5_where)"

AS_CASE([$with_hdf5], [yes|check], [baton_h5_path=$PATH],
  [baton_h5_path="$with_hdf5/bin$PATH_SEPARATOR$PATH"])
AC_PATH_PROG([H5DUMP], [h5dump], [], [$baton_h5_path])
AS_IF([test -z "$H5DUMP"],
  [AC_MSG_WARN([h5dump not found (Debian package hdf5-tools); the checkpoint tests need it])])
AC_SUBST([H5DUMP])
])
