# baton_boost_program_options.m4 -- BATON_CHECK_BOOST_PROGRAM_OPTIONS
#
# Checks for Boost.Program_options (required): link test using
# boost::program_options::options_description.
#
# Option:   --with-boost-program-options=PATH  Boost prefix (PATH/include, PATH/lib)
#           default: the default compiler paths.
# AC_SUBST: BOOST_PROGRAM_OPTIONS_CPPFLAGS BOOST_PROGRAM_OPTIONS_LDFLAGS
#           BOOST_PROGRAM_OPTIONS_LIBS
# Shell:    baton_summary_boost_program_options  e.g. "Boost 1.74.0 (/usr/include, -lboost_program_options)"
AC_DEFUN([BATON_CHECK_BOOST_PROGRAM_OPTIONS], [
AC_ARG_WITH([boost-program-options],
  [AS_HELP_STRING([--with-boost-program-options=PATH],
    [Boost prefix providing Boost.Program_options (default: system paths)])],
  [], [with_boost_program_options=check])
m4_define([_BATON_BPO_HINT],
  [install the Debian package libboost-program-options-dev, or use --with-boost-program-options=PATH])
BOOST_PROGRAM_OPTIONS_CPPFLAGS= BOOST_PROGRAM_OPTIONS_LDFLAGS= baton_bpo_where="default compiler paths"
AS_CASE([$with_boost_program_options],
  [no], [AC_MSG_ERROR([Boost.Program_options is required; --without-boost-program-options is not supported])],
  [yes|check], [],
  [AS_IF([test -f "$with_boost_program_options/include/boost/program_options.hpp"], [],
     [AC_MSG_ERROR([--with-boost-program-options=$with_boost_program_options: $with_boost_program_options/include/boost/program_options.hpp not found (expected a Boost install prefix)])])
   baton_bpo_libdir="$with_boost_program_options/lib"
   for baton_d in "$with_boost_program_options/lib" "$with_boost_program_options/lib64"; do
     AS_IF([ls "$baton_d"/libboost_program_options* >/dev/null 2>&1], [baton_bpo_libdir=$baton_d; break])
   done
   BOOST_PROGRAM_OPTIONS_CPPFLAGS="-I$with_boost_program_options/include"
   BOOST_PROGRAM_OPTIONS_LDFLAGS="-L$baton_bpo_libdir -Wl,-rpath,$baton_bpo_libdir"
   baton_bpo_where=$with_boost_program_options])

baton_save_CPPFLAGS=$CPPFLAGS baton_save_LDFLAGS=$LDFLAGS baton_save_LIBS=$LIBS
CPPFLAGS="$CPPFLAGS $BOOST_PROGRAM_OPTIONS_CPPFLAGS" LDFLAGS="$LDFLAGS $BOOST_PROGRAM_OPTIONS_LDFLAGS"
AC_MSG_CHECKING([for boost/program_options.hpp])
AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <boost/program_options.hpp>]], [[]])],
  [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_MSG_ERROR([Boost.Program_options header boost/program_options.hpp not found ($baton_bpo_where); _BATON_BPO_HINT])])
AC_COMPUTE_INT([baton_bpo_ver], [BOOST_VERSION], [[#include <boost/version.hpp>]], [baton_bpo_ver=0])
AC_MSG_CHECKING([for the Boost.Program_options library])
BOOST_PROGRAM_OPTIONS_LIBS=
for baton_l in -lboost_program_options -lboost_program_options-mt; do
  LIBS="$baton_l $baton_save_LIBS"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <boost/program_options.hpp>
namespace po = boost::program_options;]],
    [[po::options_description desc("baton");
      desc.add_options()("help,h", "help")("n", po::value<int>()->default_value(1), "n");
      const char *argv0 = "conftest"; po::variables_map vm;
      po::store(po::parse_command_line(1, &argv0, desc), vm); po::notify(vm);
      return vm.count("n") == 1 ? 0 : 1;]])],
    [BOOST_PROGRAM_OPTIONS_LIBS=$baton_l; break])
done
AS_IF([test -n "$BOOST_PROGRAM_OPTIONS_LIBS"], [AC_MSG_RESULT([$BOOST_PROGRAM_OPTIONS_LIBS])],
  [AC_MSG_RESULT([no])
   AC_MSG_ERROR([cannot link a program using boost::program_options::options_description with -lboost_program_options (see config.log); _BATON_BPO_HINT])])
baton_bpo_h=`echo '#include <boost/version.hpp>' | $CXX -E $CPPFLAGS -x c++ - 2>/dev/null | sed -n 's|^# .* "\(/.*\)/boost/version\.hpp".*|\1|p' | sed 1q`
CPPFLAGS=$baton_save_CPPFLAGS LDFLAGS=$baton_save_LDFLAGS LIBS=$baton_save_LIBS
baton_summary_boost_program_options="Boost `expr $baton_bpo_ver / 100000`.`expr $baton_bpo_ver / 100 % 1000`.`expr $baton_bpo_ver % 100` ($baton_bpo_h, $BOOST_PROGRAM_OPTIONS_LIBS)"
AC_SUBST([BOOST_PROGRAM_OPTIONS_CPPFLAGS])
AC_SUBST([BOOST_PROGRAM_OPTIONS_LDFLAGS])
AC_SUBST([BOOST_PROGRAM_OPTIONS_LIBS])
])
