# baton_gtest.m4 -- BATON_CHECK_GTEST
#
# Checks for GoogleTest >= 1.10 (required for the tests; needs
# --gtest_output=json): link test of a TEST() with GTEST_LIBS, the flags from
# GTEST_CFLAGS/GTEST_LIBS when given, else pkg-config gtest >= 1.10
# (PKG_CHECK_MODULES), else -lgtest -pthread; a compile check for the 1.10 API
# (INSTANTIATE_TEST_SUITE_P) and, when not cross-compiling, a run that writes
# --gtest_output=json.  Static-only libgtest.a (Debian) is fine.
#
# Option:   --with-gtest=PATH  GoogleTest prefix (PATH/include, PATH/lib)
#           default: pkg-config gtest, then the default compiler paths.
# AC_SUBST: GTEST_CFLAGS GTEST_LIBS (PKG_CHECK_MODULES; the tests have their own main)
# Shell:    baton_summary_gtest  e.g. "GoogleTest 1.12.1 (/usr/include/gtest/gtest.h, via pkg-config gtest)"
AC_DEFUN([BATON_CHECK_GTEST], [
AC_REQUIRE([PKG_PROG_PKG_CONFIG])
AC_ARG_WITH([gtest],
  [AS_HELP_STRING([--with-gtest=PATH],
    [GoogleTest (>= 1.10) install prefix (default: pkg-config gtest, then system paths)])],
  [], [with_gtest=check])
m4_define([_BATON_GTEST_HINT],
  [install the Debian package libgtest-dev, or use --with-gtest=PATH])
baton_gtest_where="default compiler paths" baton_gtest_ver=
AS_CASE([$with_gtest],
  [no], [AC_MSG_ERROR([GoogleTest is required; --without-gtest is not supported])],
  [yes|check],
  [dnl GTEST_CFLAGS and GTEST_LIBS given on the command line win over pkg-config.
   AS_IF([test -n "$GTEST_CFLAGS" && test -n "$GTEST_LIBS"], [baton_gtest_given=yes], [baton_gtest_given=no])
   PKG_CHECK_MODULES([GTEST], [gtest >= 1.10],
     [AS_IF([test $baton_gtest_given = yes], [baton_gtest_where="GTEST_CFLAGS/GTEST_LIBS"],
        [baton_gtest_where="pkg-config gtest"
         baton_gtest_ver=`$PKG_CONFIG --modversion gtest 2>/dev/null`])],
     [GTEST_CFLAGS= GTEST_LIBS="-lgtest -pthread"])],
  [AS_IF([test -f "$with_gtest/include/gtest/gtest.h"], [],
     [AC_MSG_ERROR([--with-gtest=$with_gtest: $with_gtest/include/gtest/gtest.h not found (expected a GoogleTest install prefix)])])
   baton_gtest_libdir="$with_gtest/lib"
   for baton_d in "$with_gtest/lib" "$with_gtest/lib64"; do
     AS_IF([test -f "$baton_d/libgtest.a" || test -f "$baton_d/libgtest.so"], [baton_gtest_libdir=$baton_d; break])
   done
   GTEST_CFLAGS="-I$with_gtest/include"
   GTEST_LIBS="-L$baton_gtest_libdir -Wl,-rpath,$baton_gtest_libdir -lgtest -pthread"
   baton_gtest_where=$with_gtest])

baton_save_CPPFLAGS=$CPPFLAGS baton_save_LDFLAGS=$LDFLAGS baton_save_LIBS=$LIBS
CPPFLAGS="$CPPFLAGS $GTEST_CFLAGS"
AC_MSG_CHECKING([for gtest/gtest.h with the GoogleTest 1.10 API])
AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <gtest/gtest.h>
#ifndef INSTANTIATE_TEST_SUITE_P
#error GoogleTest older than 1.10
#endif]], [[]])], [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <gtest/gtest.h>]], [[]])],
     [AC_MSG_ERROR([GoogleTest ($baton_gtest_where) is older than 1.10 (needed for --gtest_output=json); _BATON_GTEST_HINT])],
     [AC_MSG_ERROR([GoogleTest header gtest/gtest.h not found ($baton_gtest_where); _BATON_GTEST_HINT])])])
AC_MSG_CHECKING([for a TEST() linked with $GTEST_LIBS])
LIBS="$GTEST_LIBS $baton_save_LIBS"
AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <gtest/gtest.h>
TEST(BatonConfigure, Works) { EXPECT_EQ(1 + 1, 2); }]],
  [[::testing::InitGoogleTest(); return RUN_ALL_TESTS();]])], [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_MSG_ERROR([cannot link a GoogleTest program with $GTEST_LIBS (see config.log); _BATON_GTEST_HINT])])
AC_MSG_CHECKING([whether GoogleTest writes --gtest_output=json])
AC_RUN_IFELSE([AC_LANG_PROGRAM([[#include <gtest/gtest.h>
#include <cstdio>
#include <fstream>
TEST(BatonConfigure, Json) { EXPECT_TRUE(true); }]],
  [[char a0[] = "conftest", a1[] = "--gtest_output=json:conftest-gtest.json";
    char *av[] = {a0, a1, nullptr}; int ac = 2;
    std::remove("conftest-gtest.json");
    if (!std::freopen("conftest-gtest.out", "w", stdout)) return 2;
    ::testing::InitGoogleTest(&ac, av);
    if (RUN_ALL_TESTS() != 0) return 1;
    std::ifstream in("conftest-gtest.json"); char c = 0; in >> c;
    return c == '{' ? 0 : 1;]])],
  [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_MSG_ERROR([GoogleTest ($baton_gtest_where) did not write --gtest_output=json (need >= 1.10, see config.log); _BATON_GTEST_HINT])],
  [AC_MSG_RESULT([cross-compiling, assumed])])
rm -f conftest-gtest.json conftest-gtest.out
baton_gtest_h=`echo '#include <gtest/gtest.h>' | $CXX -E $CPPFLAGS -x c++ - 2>/dev/null | sed -n 's|^# .* "\(/.*/gtest/gtest\.h\)".*|\1|p' | sed 1q`
CPPFLAGS=$baton_save_CPPFLAGS LDFLAGS=$baton_save_LDFLAGS LIBS=$baton_save_LIBS
AS_IF([test -z "$baton_gtest_ver"], [baton_gtest_ver=">= 1.10"])
baton_summary_gtest="GoogleTest $baton_gtest_ver ($baton_gtest_h, via $baton_gtest_where)"
])
