# baton_xxhash.m4 -- BATON_CHECK_XXHASH
#
# Checks for xxHash >= 0.8 (required): xxhash.h and a link test of XXH3_64bits.
#
# Option:   --with-xxhash=PATH  xxHash prefix (PATH/include, PATH/lib)
#           default: XXHASH_CFLAGS/XXHASH_LIBS when given, else pkg-config
#           libxxhash >= 0.8 (PKG_CHECK_MODULES), else the default compiler paths.
# AC_SUBST: XXHASH_CFLAGS XXHASH_LIBS (PKG_CHECK_MODULES)
# Shell:    BATON_XXHASH_PC (libxxhash when pkg-config found it, for baton.pc)
# Shell:    baton_summary_xxhash  e.g. "xxHash 0.8.1 (/usr/include/xxhash.h, via pkg-config libxxhash)"
# Defines:  BATON_HAVE_XXH3_DISPATCH 0/1: the library has xxHash's x86 dispatcher
#           (xxh_x86dispatch.h, XXH3_64bits_update_dispatch), which picks AVX2 or
#           AVX-512 at run time; the plain XXH3 entry points of a distribution's
#           library are built for SSE2 only (3.4-4 GB/s against 10-11.5 GB/s with
#           AVX2, measured 2026-12-04 on this project's AMD EPYC node).
AC_DEFUN([BATON_CHECK_XXHASH], [
AC_REQUIRE([PKG_PROG_PKG_CONFIG])
AC_ARG_WITH([xxhash],
  [AS_HELP_STRING([--with-xxhash=PATH],
    [xxHash (>= 0.8) install prefix (default: pkg-config libxxhash, then system paths)])],
  [], [with_xxhash=check])
m4_define([_BATON_XXHASH_HINT],
  [install the Debian package libxxhash-dev, or use --with-xxhash=PATH])
baton_xxhash_where="default compiler paths" BATON_XXHASH_PC=
AS_CASE([$with_xxhash],
  [no], [AC_MSG_ERROR([xxHash is required; --without-xxhash is not supported])],
  [yes|check],
  [dnl XXHASH_CFLAGS and XXHASH_LIBS given on the command line win over pkg-config.
   AS_IF([test -n "$XXHASH_CFLAGS" && test -n "$XXHASH_LIBS"], [baton_xxhash_given=yes], [baton_xxhash_given=no])
   PKG_CHECK_MODULES([XXHASH], [libxxhash >= 0.8],
     [AS_IF([test $baton_xxhash_given = yes], [baton_xxhash_where="XXHASH_CFLAGS/XXHASH_LIBS"],
        [baton_xxhash_where="pkg-config libxxhash" BATON_XXHASH_PC=libxxhash])],
     [XXHASH_CFLAGS= XXHASH_LIBS=-lxxhash])],
  [AS_IF([test -d "$with_xxhash"], [],
     [AC_MSG_ERROR([--with-xxhash=$with_xxhash: directory does not exist (expected an xxHash prefix with include/xxhash.h and lib/libxxhash.so)])])
   AS_IF([test -f "$with_xxhash/include/xxhash.h"], [],
     [AC_MSG_ERROR([--with-xxhash=$with_xxhash: $with_xxhash/include/xxhash.h not found])])
   baton_xxhash_libdir="$with_xxhash/lib"
   for baton_d in "$with_xxhash/lib" "$with_xxhash/lib64"; do
     AS_IF([test -f "$baton_d/libxxhash.so" || test -f "$baton_d/libxxhash.a"], [baton_xxhash_libdir=$baton_d; break])
   done
   XXHASH_CFLAGS="-I$with_xxhash/include"
   XXHASH_LIBS="-L$baton_xxhash_libdir -Wl,-rpath,$baton_xxhash_libdir -lxxhash"
   baton_xxhash_where=$with_xxhash])

baton_save_CPPFLAGS=$CPPFLAGS baton_save_LDFLAGS=$LDFLAGS baton_save_LIBS=$LIBS
CPPFLAGS="$CPPFLAGS $XXHASH_CFLAGS"
AC_MSG_CHECKING([for xxhash.h >= 0.8])
AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <xxhash.h>
#if !defined(XXH_VERSION_NUMBER) || XXH_VERSION_NUMBER < 800
#error xxHash too old
#endif]], [[]])], [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <xxhash.h>]], [[]])],
     [AC_MSG_ERROR([xxhash.h found ($baton_xxhash_where) but xxHash is older than 0.8 (no XXH3); _BATON_XXHASH_HINT])],
     [AC_MSG_ERROR([xxHash header xxhash.h not found ($baton_xxhash_where); _BATON_XXHASH_HINT])])])
baton_xxhash_h=`echo '#include <xxhash.h>' | $CXX -E $CPPFLAGS -x c++ - 2>/dev/null | sed -n 's|^# .* "\(/.*xxhash\.h\)".*|\1|p' | sed 1q`
AC_COMPUTE_INT([baton_xxh_ver], [XXH_VERSION_NUMBER], [[#include <xxhash.h>]], [baton_xxh_ver=0])
LIBS="$XXHASH_LIBS $LIBS"
AC_MSG_CHECKING([for XXH3_64bits])
AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <xxhash.h>]],
  [[return XXH3_64bits("baton", 5) == 0;]])], [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_MSG_ERROR([cannot link XXH3_64bits with $XXHASH_LIBS (see config.log); _BATON_XXHASH_HINT])])
AC_MSG_CHECKING([for XXH3_64bits_update_dispatch (xxHash's x86 dispatcher)])
AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <xxh_x86dispatch.h>]],
  [[return XXH3_64bits_update_dispatch(XXH3_createState(), "baton", 5) != XXH_OK;]])],
  [AC_MSG_RESULT([yes]); baton_xxh3_dispatch=1], [AC_MSG_RESULT([no]); baton_xxh3_dispatch=0])
AC_DEFINE_UNQUOTED([BATON_HAVE_XXH3_DISPATCH], [$baton_xxh3_dispatch],
  [Define to 1 if libxxhash has the x86 dispatcher (XXH3_64bits_update_dispatch), 0 otherwise.])
CPPFLAGS=$baton_save_CPPFLAGS LDFLAGS=$baton_save_LDFLAGS LIBS=$baton_save_LIBS
baton_summary_xxhash="xxHash `expr $baton_xxh_ver / 10000`.`expr $baton_xxh_ver / 100 % 100`.`expr $baton_xxh_ver % 100` ($baton_xxhash_h, via $baton_xxhash_where`test $baton_xxh3_dispatch = 1 && echo ', x86 dispatch'`)"
])
