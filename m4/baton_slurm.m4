# baton_slurm.m4 -- BATON_CHECK_SLURM
#
# Checks for the Slurm development files (required): slurm/slurm.h,
# slurm/spank.h, a link test of slurm_hostlist_create with -lslurm, the
# version (SLURM_VERSION_NUMBER), and where Slurm's own plugins are (the
# first directory holding select_cons_tres.so, mpi_pmix.so, proctrack_*.so,
# ..., searched next to libslurm, in PATH/lib*/slurm, the pkg-config slurm
# libdir, and the usual system locations), which the summary tells.
# The SPANK plugin installs into ${libdir}/slurm unless --with-slurm-plugindir
# says otherwise: under the prefix, so `make distcheck` and installs without
# root work; plugstack.conf names the plugin by its full path.
#
# Options:  --with-slurm=PATH            Slurm prefix (PATH/include, PATH/lib)
#                                        default: pkg-config slurm, then default paths
#           --with-slurm-plugindir=DIR   where to install the SPANK plugin
#                                        (default: ${libdir}/slurm)
# AC_SUBST: SLURM_CPPFLAGS SLURM_LDFLAGS SLURM_LIBS SLURM_PLUGINDIR
# Shell:    baton_summary_slurm  e.g. "Slurm 22.05.8 (/usr/include/slurm/slurm.h, via default compiler paths), its own plugins in /usr/lib/x86_64-linux-gnu/slurm-wlm"
AC_DEFUN([BATON_CHECK_SLURM], [
AC_REQUIRE([PKG_PROG_PKG_CONFIG])
AC_ARG_WITH([slurm],
  [AS_HELP_STRING([--with-slurm=PATH],
    [Slurm install prefix (default: pkg-config slurm, then system paths)])],
  [], [with_slurm=check])
AC_ARG_WITH([slurm-plugindir],
  [AS_HELP_STRING([--with-slurm-plugindir=DIR],
    [where to install the SPANK plugin (default: LIBDIR/slurm; plugstack.conf names it by its full path)])],
  [], [with_slurm_plugindir=check])
m4_define([_BATON_SLURM_HINT],
  [install the Debian package libslurm-dev, or use --with-slurm=PATH])
SLURM_CPPFLAGS= SLURM_LDFLAGS= SLURM_LIBS=-lslurm baton_slurm_where="default compiler paths"
baton_slurm_ma=`$CXX -print-multiarch 2>/dev/null`
baton_slurm_pdirs=
AS_CASE([$with_slurm],
  [no], [AC_MSG_ERROR([Slurm is required; --without-slurm is not supported])],
  [yes|check],
  [AS_IF([test -n "$PKG_CONFIG" && $PKG_CONFIG --exists slurm], [
     SLURM_CPPFLAGS=`$PKG_CONFIG --cflags slurm`
     SLURM_LDFLAGS=`$PKG_CONFIG --libs-only-L slurm`
     SLURM_LIBS=`$PKG_CONFIG --libs-only-l slurm`
     baton_slurm_where="pkg-config slurm"
     baton_slurm_pdirs="`$PKG_CONFIG --variable=libdir slurm`/slurm"])],
  [AS_IF([test -f "$with_slurm/include/slurm/slurm.h"], [],
     [AC_MSG_ERROR([--with-slurm=$with_slurm: $with_slurm/include/slurm/slurm.h not found (expected a Slurm install prefix)])])
   baton_slurm_libdir="$with_slurm/lib"
   for baton_d in "$with_slurm/lib" "$with_slurm/lib64" "$with_slurm/lib/$baton_slurm_ma"; do
     AS_IF([test -f "$baton_d/libslurm.so" || test -f "$baton_d/libslurm.a"], [baton_slurm_libdir=$baton_d; break])
   done
   SLURM_CPPFLAGS="-I$with_slurm/include"
   SLURM_LDFLAGS="-L$baton_slurm_libdir -Wl,-rpath,$baton_slurm_libdir"
   baton_slurm_where=$with_slurm
   baton_slurm_pdirs="$baton_slurm_libdir/slurm $baton_slurm_libdir/slurm-wlm $with_slurm/lib/slurm $with_slurm/lib64/slurm"])

baton_save_CPPFLAGS=$CPPFLAGS baton_save_LDFLAGS=$LDFLAGS baton_save_LIBS=$LIBS
CPPFLAGS="$CPPFLAGS $SLURM_CPPFLAGS"
AC_MSG_CHECKING([for slurm/slurm.h and slurm/spank.h])
AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <slurm/slurm.h>
#include <slurm/spank.h>]], [[]])], [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_MSG_ERROR([Slurm headers slurm/slurm.h and slurm/spank.h not found ($baton_slurm_where); _BATON_SLURM_HINT])])
AC_COMPUTE_INT([baton_slurm_ver], [SLURM_VERSION_NUMBER], [[#include <slurm/slurm_version.h>]], [baton_slurm_ver=0])
LDFLAGS="$LDFLAGS $SLURM_LDFLAGS" LIBS="$SLURM_LIBS $LIBS"
AC_MSG_CHECKING([for slurm_hostlist_create in -lslurm])
AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <slurm/slurm.h>]],
  [[hostlist_t hl = slurm_hostlist_create("node1,node2"); slurm_hostlist_destroy(hl);]])],
  [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_MSG_ERROR([cannot link slurm_hostlist_create with $SLURM_LDFLAGS $SLURM_LIBS (see config.log); _BATON_SLURM_HINT])])
baton_slurm_h=`echo '#include <slurm/slurm.h>' | $CXX -E $CPPFLAGS -x c++ - 2>/dev/null | sed -n 's|^# .* "\(/.*/slurm/slurm\.h\)".*|\1|p' | sed 1q`
dnl Directory holding the libslurm we link against (candidates for the plugin dir).
AS_CASE([$with_slurm], [yes|check], [
  baton_slurm_so=`$CXX $LDFLAGS -print-file-name=libslurm.so 2>/dev/null`
  AS_IF([test -f "$baton_slurm_so"], [
    baton_slurm_sodir=`dirname "$baton_slurm_so"`
    baton_slurm_sodir=`cd "$baton_slurm_sodir" && pwd -P`
    baton_slurm_pdirs="$baton_slurm_pdirs $baton_slurm_sodir/slurm-wlm $baton_slurm_sodir/slurm"])])
CPPFLAGS=$baton_save_CPPFLAGS LDFLAGS=$baton_save_LDFLAGS LIBS=$baton_save_LIBS

dnl Where Slurm's own plugins are: told in the summary, not the default, so
dnl that an install stays under --prefix (make distcheck, non-root installs).
dnl plugstack.conf names the plugin by its full path, so any directory works.
AC_MSG_CHECKING([where Slurm's own plugins are])
baton_slurm_own_pdir=
for baton_d in $baton_slurm_pdirs /usr/lib/$baton_slurm_ma/slurm-wlm /usr/lib/$baton_slurm_ma/slurm \
               /usr/lib64/slurm /usr/lib/slurm /usr/local/lib/slurm /usr/local/lib64/slurm; do
  for baton_f in select_cons_tres.so mpi_pmix.so select_linear.so proctrack_cgroup.so proctrack_pgid.so auth_munge.so; do
    AS_IF([test -f "$baton_d/$baton_f"], [baton_slurm_own_pdir=$baton_d; break])
  done
  test -n "$baton_slurm_own_pdir" && break
done
AS_IF([test -n "$baton_slurm_own_pdir"], [AC_MSG_RESULT([$baton_slurm_own_pdir (contains $baton_f)])],
  [AC_MSG_RESULT([not found])
   baton_slurm_own_pdir="not found (scontrol show config | grep PluginDir)"])
AC_MSG_CHECKING([where to install the SPANK plugin])
AS_CASE([$with_slurm_plugindir],
  [no], [AC_MSG_ERROR([--without-slurm-plugindir is not supported; give --with-slurm-plugindir=DIR])],
  [yes|check|""],
  [SLURM_PLUGINDIR='${libdir}/slurm'
   AC_MSG_RESULT([$SLURM_PLUGINDIR (the default; --with-slurm-plugindir=DIR to change)])],
  [SLURM_PLUGINDIR=$with_slurm_plugindir
   AC_MSG_RESULT([$SLURM_PLUGINDIR (from --with-slurm-plugindir)])])
baton_slurm_v1=`expr $baton_slurm_ver / 65536` baton_slurm_v2=`expr $baton_slurm_ver / 256 % 256` baton_slurm_v3=`expr $baton_slurm_ver % 256`
baton_summary_slurm="Slurm `printf '%d.%02d.%d' $baton_slurm_v1 $baton_slurm_v2 $baton_slurm_v3` ($baton_slurm_h, via $baton_slurm_where), its own plugins in $baton_slurm_own_pdir"
AC_SUBST([SLURM_CPPFLAGS])
AC_SUBST([SLURM_LDFLAGS])
AC_SUBST([SLURM_LIBS])
AC_SUBST([SLURM_PLUGINDIR])
])
