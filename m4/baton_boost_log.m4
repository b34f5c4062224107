# baton_boost_log.m4 -- BATON_CHECK_BOOST_LOG
#
# Checks for Boost.Log (required), built as shared libraries (BOOST_LOG_DYN_LINK).
# Link test: severity_channel_logger_mt, add_console_log with a formatter,
# a synchronous text_ostream_backend sink with set_formatter and attributes.
# BOOST_LOG_LIBS is the first working set of:
#   -lboost_log_setup -lboost_log [-lboost_thread [-lboost_filesystem [-lboost_system]]] -pthread
#
# Option:   --with-boost-log=PATH  Boost prefix (PATH/include, PATH/lib)
#           default: the default compiler paths.
# AC_SUBST: BOOST_LOG_CPPFLAGS BOOST_LOG_LDFLAGS BOOST_LOG_LIBS
# Shell:    baton_summary_boost_log  e.g. "Boost.Log 1.74.0 (/usr/include, -lboost_log_setup ...)"
AC_DEFUN([BATON_CHECK_BOOST_LOG], [
AC_ARG_WITH([boost-log],
  [AS_HELP_STRING([--with-boost-log=PATH],
    [Boost prefix providing Boost.Log (default: system paths)])],
  [], [with_boost_log=check])
m4_define([_BATON_BLOG_HINT],
  [install the Debian package libboost-log-dev, or use --with-boost-log=PATH])
BOOST_LOG_CPPFLAGS=-DBOOST_LOG_DYN_LINK BOOST_LOG_LDFLAGS= baton_blog_where="default compiler paths"
AS_CASE([$with_boost_log],
  [no], [AC_MSG_ERROR([Boost.Log is required; --without-boost-log is not supported])],
  [yes|check], [],
  [AS_IF([test -f "$with_boost_log/include/boost/log/core.hpp"], [],
     [AC_MSG_ERROR([--with-boost-log=$with_boost_log: $with_boost_log/include/boost/log/core.hpp not found (expected a Boost install prefix)])])
   baton_blog_libdir="$with_boost_log/lib"
   for baton_d in "$with_boost_log/lib" "$with_boost_log/lib64"; do
     AS_IF([ls "$baton_d"/libboost_log* >/dev/null 2>&1], [baton_blog_libdir=$baton_d; break])
   done
   BOOST_LOG_CPPFLAGS="-I$with_boost_log/include $BOOST_LOG_CPPFLAGS"
   BOOST_LOG_LDFLAGS="-L$baton_blog_libdir -Wl,-rpath,$baton_blog_libdir"
   baton_blog_where=$with_boost_log])

baton_save_CPPFLAGS=$CPPFLAGS baton_save_LDFLAGS=$LDFLAGS baton_save_LIBS=$LIBS
CPPFLAGS="$CPPFLAGS $BOOST_LOG_CPPFLAGS" LDFLAGS="$LDFLAGS $BOOST_LOG_LDFLAGS"
AC_MSG_CHECKING([for boost/log/core.hpp])
AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <boost/log/core.hpp>]], [[]])],
  [AC_MSG_RESULT([yes])],
  [AC_MSG_RESULT([no])
   AC_MSG_ERROR([Boost.Log headers not found ($baton_blog_where); _BATON_BLOG_HINT])])
AC_COMPUTE_INT([baton_blog_ver], [BOOST_VERSION], [[#include <boost/version.hpp>]], [baton_blog_ver=0])
AC_MSG_CHECKING([for the libraries needed by Boost.Log])
BOOST_LOG_LIBS=
for baton_l in "" " -lboost_thread" " -lboost_thread -lboost_filesystem" " -lboost_thread -lboost_filesystem -lboost_system"; do
  LIBS="-lboost_log_setup -lboost_log$baton_l -pthread $baton_save_LIBS"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <iostream>
#include <string>
#include <boost/core/null_deleter.hpp>
#include <boost/log/core.hpp>
#include <boost/log/trivial.hpp>
#include <boost/log/expressions.hpp>
#include <boost/log/attributes.hpp>
#include <boost/log/sources/severity_channel_logger.hpp>
#include <boost/log/sources/record_ostream.hpp>
#include <boost/log/sinks/sync_frontend.hpp>
#include <boost/log/sinks/text_ostream_backend.hpp>
#include <boost/log/utility/setup/console.hpp>
#include <boost/log/utility/setup/common_attributes.hpp>
namespace logging = boost::log;
namespace expr = boost::log::expressions;
namespace sinks = boost::log::sinks;]],
    [[logging::add_common_attributes();
      logging::add_console_log(std::clog, logging::keywords::format =
        expr::stream << expr::attr<std::string>("Channel") << ": " << expr::smessage);
      typedef sinks::synchronous_sink<sinks::text_ostream_backend> sink_t;
      boost::shared_ptr<sink_t> sink = boost::make_shared<sink_t>();
      sink->locked_backend()->add_stream(boost::shared_ptr<std::ostream>(&std::clog, boost::null_deleter()));
      sink->set_formatter(expr::stream << expr::attr<unsigned int>("LineID") << " " << expr::smessage);
      logging::core::get()->add_sink(sink);
      logging::core::get()->add_global_attribute("Rank", logging::attributes::constant<int>(0));
      logging::sources::severity_channel_logger_mt<logging::trivial::severity_level, std::string>
        lg(logging::keywords::channel = "baton");
      BOOST_LOG_SEV(lg, logging::trivial::info) << "configure";]])],
    [BOOST_LOG_LIBS="-lboost_log_setup -lboost_log$baton_l -pthread"; break])
done
AS_IF([test -n "$BOOST_LOG_LIBS"], [AC_MSG_RESULT([$BOOST_LOG_LIBS])],
  [AC_MSG_RESULT([no])
   AC_MSG_ERROR([cannot link a Boost.Log program (severity_channel_logger_mt, console/text_ostream sinks) with -lboost_log_setup -lboost_log -lboost_thread -lboost_filesystem -pthread (see config.log); _BATON_BLOG_HINT])])
baton_blog_h=`echo '#include <boost/version.hpp>' | $CXX -E $CPPFLAGS -x c++ - 2>/dev/null | sed -n 's|^# .* "\(/.*\)/boost/version\.hpp".*|\1|p' | sed 1q`
CPPFLAGS=$baton_save_CPPFLAGS LDFLAGS=$baton_save_LDFLAGS LIBS=$baton_save_LIBS
baton_summary_boost_log="Boost.Log `expr $baton_blog_ver / 100000`.`expr $baton_blog_ver / 100 % 1000`.`expr $baton_blog_ver % 100` ($baton_blog_h, $BOOST_LOG_LIBS)"
AC_SUBST([BOOST_LOG_CPPFLAGS])
AC_SUBST([BOOST_LOG_LDFLAGS])
AC_SUBST([BOOST_LOG_LIBS])
])
