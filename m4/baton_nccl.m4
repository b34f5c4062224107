# baton_nccl.m4 -- BATON_CHECK_NCCL
#
# Checks for NCCL >= 2.18 (optional; needs CUDA from BATON_CHECK_CUDA): nccl.h,
# NCCL_VERSION_CODE, and a link test of ncclGetUniqueId, ncclCommInitRankConfig
# and ncclCommSplit with -lnccl (link only: no GPU is needed).
# Candidates (auto/yes): $NCCL_HOME, $NCCL_ROOT, the CUDA prefix
# (include/ + lib/ or lib64/), then /usr (default compiler paths).
#
# Option:   --with-nccl=PATH|yes|no   default: auto (not found -> notice, off);
#                                     PATH or yes that fails -> error.
# AC_SUBST: NCCL_CPPFLAGS NCCL_LDFLAGS NCCL_LIBS (use together with the CUDA_* ones)
# Defines:  BATON_HAVE_NCCL 0/1 (AC_DEFINE_UNQUOTED), AM_CONDITIONAL BATON_HAVE_NCCL
# Shell:    baton_have_nccl=yes|no,
#           baton_summary_nccl  e.g. "NCCL 2.28.9 (/usr/local/cuda/include/nccl.h, /usr/local/cuda/lib)"
AC_DEFUN([BATON_CHECK_NCCL], [
AC_REQUIRE([BATON_CHECK_CUDA])
AC_ARG_WITH([nccl],
  [AS_HELP_STRING([--with-nccl=PATH|yes|no],
    [NCCL (>= 2.18) prefix (default: auto: next to CUDA, then system paths)])],
  [], [with_nccl=auto])
NCCL_CPPFLAGS= NCCL_LDFLAGS= NCCL_LIBS= baton_have_nccl=no baton_nccl_why="not found"
AS_CASE([$with_nccl],
  [no], [baton_nccl_cands= baton_nccl_why="disabled by --without-nccl"],
  [yes|auto], [baton_nccl_cands="$NCCL_HOME $NCCL_ROOT $baton_cuda_prefix /usr"],
  [AS_IF([test -d "$with_nccl"], [],
     [AC_MSG_ERROR([--with-nccl=$with_nccl: directory does not exist (expected an NCCL prefix with include/nccl.h and lib/libnccl.so)])])
   baton_nccl_cands=$with_nccl])
AS_IF([test "$with_nccl" != no && test "$baton_have_cuda" != yes], [
  baton_nccl_cands= baton_nccl_why="NCCL needs CUDA, which is not available: $baton_cuda_why"
  AS_IF([test "$with_nccl" = auto], [],
    [AC_MSG_ERROR([NCCL was requested (--with-nccl=$with_nccl) but $baton_nccl_why; see --with-cuda])])])
baton_save_CPPFLAGS=$CPPFLAGS baton_save_LDFLAGS=$LDFLAGS baton_save_LIBS=$LIBS
baton_nccl_seen=
for baton_p in $baton_nccl_cands; do
  AS_CASE([" $baton_nccl_seen "], [*" $baton_p "*], [continue])
  baton_nccl_seen="$baton_nccl_seen $baton_p"
  AS_IF([test -f "$baton_p/include/nccl.h"], [],
    [baton_nccl_why="no include/nccl.h under $baton_p"; continue])
  AC_MSG_CHECKING([for NCCL >= 2.18 in $baton_p])
  AS_IF([test "$baton_p" = /usr],
    [baton_n_cpp= baton_n_ld= baton_n_libdir=],
    [baton_n_libdir=
     for baton_d in "$baton_p/lib" "$baton_p/lib64" "$baton_p"/targets/*/lib; do
       AS_IF([test -f "$baton_d/libnccl.so"], [baton_n_libdir=$baton_d; break])
     done
     AS_IF([test -z "$baton_n_libdir"], [AC_MSG_RESULT([no libnccl.so]); baton_nccl_why="no libnccl.so under $baton_p"; continue])
     baton_n_cpp="-I$baton_p/include" baton_n_ld="-L$baton_n_libdir -Wl,-rpath,$baton_n_libdir"])
  CPPFLAGS="$baton_save_CPPFLAGS $baton_n_cpp $CUDA_CPPFLAGS"
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <nccl.h>
#if !defined(NCCL_VERSION_CODE) || !defined(NCCL_VERSION) || NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error NCCL too old
#endif]], [[]])], [],
    [AC_MSG_RESULT([no (nccl.h older than 2.18)])
     baton_nccl_why="$baton_p/include/nccl.h is older than 2.18"; continue])
  LDFLAGS="$baton_save_LDFLAGS $baton_n_ld $CUDA_LDFLAGS" LIBS="-lnccl $CUDA_LIBS $baton_save_LIBS"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <nccl.h>]],
    [[ncclUniqueId id; ncclComm_t comm = 0, sub = 0;
      ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
      if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
      if (ncclCommInitRankConfig(&comm, 1, id, 0, &cfg) != ncclSuccess) return 1;
      return ncclCommSplit(comm, 0, 0, &sub, &cfg) == ncclSuccess ? 0 : 1;]])],
    [AC_MSG_RESULT([yes])
     AC_COMPUTE_INT([baton_nccl_v1], [NCCL_MAJOR], [[#include <nccl.h>]], [baton_nccl_v1=?])
     AC_COMPUTE_INT([baton_nccl_v2], [NCCL_MINOR], [[#include <nccl.h>]], [baton_nccl_v2=?])
     AC_COMPUTE_INT([baton_nccl_v3], [NCCL_PATCH], [[#include <nccl.h>]], [baton_nccl_v3=?])
     NCCL_CPPFLAGS=$baton_n_cpp NCCL_LDFLAGS=$baton_n_ld NCCL_LIBS=-lnccl
     baton_have_nccl=yes baton_nccl_where="$baton_p/include/nccl.h, ${baton_n_libdir:-default library path}"
     break],
    [AC_MSG_RESULT([no])
     baton_nccl_why="cannot link ncclGetUniqueId/ncclCommInitRankConfig/ncclCommSplit with -lnccl in $baton_p (see config.log)"])
done
CPPFLAGS=$baton_save_CPPFLAGS LDFLAGS=$baton_save_LDFLAGS LIBS=$baton_save_LIBS
AS_IF([test "$baton_have_nccl" = yes],
  [baton_summary_nccl="NCCL $baton_nccl_v1.$baton_nccl_v2.$baton_nccl_v3 ($baton_nccl_where)"
   baton_nccl_val=1],
  [AS_CASE([$with_nccl],
     [no|auto], [AS_IF([test "$with_nccl" = auto],
                   [AC_MSG_NOTICE([building without NCCL: $baton_nccl_why; use --with-nccl=PATH to point at NCCL >= 2.18])])],
     [AC_MSG_ERROR([NCCL was requested (--with-nccl=$with_nccl) but is unusable: $baton_nccl_why (tried: $baton_nccl_cands). Install NCCL >= 2.18 (nccl.h, libnccl.so; Debian: libnccl-dev) or fix --with-nccl=PATH])])
   baton_summary_nccl="no ($baton_nccl_why)"
   baton_nccl_val=0])
AC_DEFINE_UNQUOTED([BATON_HAVE_NCCL], [$baton_nccl_val], [Define to 1 if NCCL (>= 2.18) is available, 0 otherwise.])
AM_CONDITIONAL([BATON_HAVE_NCCL], [test "$baton_have_nccl" = yes])
AC_SUBST([NCCL_CPPFLAGS])
AC_SUBST([NCCL_LDFLAGS])
AC_SUBST([NCCL_LIBS])
])
