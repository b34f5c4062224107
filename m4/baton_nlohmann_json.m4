# baton_nlohmann_json.m4 -- BATON_CHECK_NLOHMANN_JSON
#
# Checks for nlohmann/json >= 3.9 (required, header-only): compile test that
# parses a JSON string, version from NLOHMANN_JSON_VERSION_MAJOR/MINOR.
#
# Option:   --with-nlohmann-json=PATH  prefix with include/nlohmann/json.hpp
#           default: NLOHMANN_JSON_CFLAGS/_LIBS when given, else pkg-config
#           nlohmann_json >= 3.9 (PKG_CHECK_MODULES), else the default compiler paths.
# AC_SUBST: NLOHMANN_JSON_CFLAGS NLOHMANN_JSON_LIBS (empty when the header is in /usr/include)
# Shell:    baton_summary_nlohmann_json  e.g. "nlohmann/json 3.11.2 (/usr/include/nlohmann/json.hpp, via pkg-config nlohmann_json)"
AC_DEFUN([BATON_CHECK_NLOHMANN_JSON], [
AC_REQUIRE([PKG_PROG_PKG_CONFIG])
AC_ARG_WITH([nlohmann-json],
  [AS_HELP_STRING([--with-nlohmann-json=PATH],
    [nlohmann/json (>= 3.9) prefix (default: pkg-config nlohmann_json, then system paths)])],
  [], [with_nlohmann_json=check])
m4_define([_BATON_NJ_HINT],
  [install the Debian package nlohmann-json3-dev, or use --with-nlohmann-json=PATH])
baton_nj_where="default compiler paths"
AS_CASE([$with_nlohmann_json],
  [no], [AC_MSG_ERROR([nlohmann/json is required; --without-nlohmann-json is not supported])],
  [yes|check],
  [dnl NLOHMANN_JSON_CFLAGS/_LIBS given on the command line win over pkg-config.
   AS_IF([test -n "$NLOHMANN_JSON_CFLAGS" && test -n "$NLOHMANN_JSON_LIBS"], [baton_nj_given=yes], [baton_nj_given=no])
   PKG_CHECK_MODULES([NLOHMANN_JSON], [nlohmann_json >= 3.9],
     [AS_IF([test $baton_nj_given = yes], [baton_nj_where="NLOHMANN_JSON_CFLAGS/_LIBS"],
        [baton_nj_where="pkg-config nlohmann_json"])],
     [NLOHMANN_JSON_CFLAGS= NLOHMANN_JSON_LIBS=])],
  [AS_IF([test -f "$with_nlohmann_json/include/nlohmann/json.hpp"], [],
     [AC_MSG_ERROR([--with-nlohmann-json=$with_nlohmann_json: $with_nlohmann_json/include/nlohmann/json.hpp not found])])
   NLOHMANN_JSON_CFLAGS="-I$with_nlohmann_json/include" NLOHMANN_JSON_LIBS=
   baton_nj_where=$with_nlohmann_json])

baton_save_CPPFLAGS=$CPPFLAGS
CPPFLAGS="$CPPFLAGS $NLOHMANN_JSON_CFLAGS"
AC_MSG_CHECKING([for nlohmann/json.hpp])
AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <nlohmann/json.hpp>]],
  [[nlohmann::json j = nlohmann::json::parse(R"({"rank": 3, "ckpt": {"step": 7}})");
    return j.at("ckpt").at("step").get<int>() == 7 ? 0 : 1;]])],
  [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_MSG_ERROR([nlohmann/json.hpp not found or unusable ($baton_nj_where); _BATON_NJ_HINT])])
AC_MSG_CHECKING([whether nlohmann/json is at least 3.9])
AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <nlohmann/json.hpp>
#if !defined(NLOHMANN_JSON_VERSION_MAJOR) || NLOHMANN_JSON_VERSION_MAJOR < 3 || (NLOHMANN_JSON_VERSION_MAJOR == 3 && NLOHMANN_JSON_VERSION_MINOR < 9)
#error too old
#endif]], [[]])], [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_MSG_ERROR([nlohmann/json ($baton_nj_where) is older than 3.9; _BATON_NJ_HINT])])
AC_COMPUTE_INT([baton_nj_major], [NLOHMANN_JSON_VERSION_MAJOR], [[#include <nlohmann/json.hpp>]], [baton_nj_major=?])
AC_COMPUTE_INT([baton_nj_minor], [NLOHMANN_JSON_VERSION_MINOR], [[#include <nlohmann/json.hpp>]], [baton_nj_minor=?])
AC_COMPUTE_INT([baton_nj_patch], [NLOHMANN_JSON_VERSION_PATCH], [[#include <nlohmann/json.hpp>]], [baton_nj_patch=?])
baton_nj_h=`echo '#include <nlohmann/json.hpp>' | $CXX -E $CPPFLAGS -x c++ - 2>/dev/null | sed -n 's|^# .* "\(/.*/nlohmann/json\.hpp\)".*|\1|p' | sed 1q`
CPPFLAGS=$baton_save_CPPFLAGS
baton_summary_nlohmann_json="nlohmann/json $baton_nj_major.$baton_nj_minor.$baton_nj_patch ($baton_nj_h, via $baton_nj_where)"
])
