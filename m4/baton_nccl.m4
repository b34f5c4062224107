# baton_nccl.m4 -- BATON_CHECK_NCCL
#
# Checks for NCCL >= 2.18 (optional; needs CUDA >= 12.5 from BATON_CHECK_CUDA,
# for cudaGetDriverEntryPointByVersion): nccl.h, NCCL_VERSION_CODE, and a
# libnccl.so or versioned libnccl.so.N beside it. Nothing links NCCL or
# the CUDA runtime: libbaton dlopen()s both when the nccl backend is first
# asked for (mpi_runtime/nccl/nccl_library.h), so only the headers and the
# library's place matter here.
# Candidates (auto/yes): $NCCL_HOME, $NCCL_ROOT, the CUDA prefix
# (include/ + lib/ or lib64/), then /usr (default compiler paths). A
# candidate may also be a Python site-packages or nvidia/ folder holding
# NVIDIA's wheel (nvidia/nccl/include/nccl.h, nvidia/nccl/lib/libnccl.so.2).
#
# Option:   --with-nccl=PATH|yes|no   default: auto (not found -> notice, off);
#                                     PATH or yes that fails -> error.
#           --with-nccl-runtime=DIR   searched first for libnccl and libcudart
#                                     at run time (after $BATON_NCCL_LIBRARY_PATH).
# AC_SUBST: NCCL_CPPFLAGS NCCL_LDFLAGS NCCL_LIBS (use together with the CUDA_* ones;
#           NCCL_LDFLAGS/NCCL_LIBS only for programs that call NCCL directly)
# Defines:  BATON_HAVE_NCCL 0/1 (AC_DEFINE_UNQUOTED), AM_CONDITIONAL BATON_HAVE_NCCL,
#           BATON_NCCL_RUNTIME_DIR, BATON_NCCL_FOUND_DIRS (strings, for the loader)
# Shell:    baton_have_nccl=yes|no,
#           baton_summary_nccl  e.g. "NCCL 2.28.9 (/usr/local/cuda/include/nccl.h, /usr/local/cuda/lib)"
AC_DEFUN([BATON_CHECK_NCCL], [
AC_REQUIRE([BATON_CHECK_CUDA])
AC_ARG_WITH([nccl],
  [AS_HELP_STRING([--with-nccl=PATH|yes|no],
    [NCCL (>= 2.18) prefix (default: auto: next to CUDA, then system paths)])],
  [], [with_nccl=auto])
AC_ARG_WITH([nccl-runtime],
  [AS_HELP_STRING([--with-nccl-runtime=DIR],
    [where libnccl and libcudart are looked for first at run time (a folder, or a Python site-packages with NVIDIA's wheels); $BATON_NCCL_LIBRARY_PATH comes before it])],
  [AS_IF([test -d "$with_nccl_runtime"], [],
     [AC_MSG_ERROR([--with-nccl-runtime=$with_nccl_runtime: directory does not exist])])],
  [with_nccl_runtime=])
NCCL_CPPFLAGS= NCCL_LDFLAGS= NCCL_LIBS= baton_have_nccl=no baton_nccl_why="not found" baton_nccl_libdir=
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
# The backend reaches the driver through cudaGetDriverEntryPointByVersion,
# new in CUDA 12.5.
AS_IF([test "$with_nccl" != no && test "$baton_have_cuda" = yes && test "${baton_cudart_ver:-0}" -lt 12050], [
  baton_nccl_cands= baton_nccl_why="NCCL backend not built: the CUDA runtime ($baton_cuda_prefix) is `expr ${baton_cudart_ver:-0} / 1000`.`expr ${baton_cudart_ver:-0} % 1000 / 10`, the backend needs CUDA >= 12.5 (cudaGetDriverEntryPointByVersion)"
  AS_IF([test "$with_nccl" = auto], [],
    [AC_MSG_ERROR([NCCL was requested (--with-nccl=$with_nccl) but $baton_nccl_why; see --with-cuda])])])
baton_save_CPPFLAGS=$CPPFLAGS baton_save_LDFLAGS=$LDFLAGS baton_save_LIBS=$LIBS
baton_nccl_seen=
for baton_p in $baton_nccl_cands; do
  AS_CASE([" $baton_nccl_seen "], [*" $baton_p "*], [continue])
  baton_nccl_seen="$baton_nccl_seen $baton_p"
  # NVIDIA's wheel, named by its site-packages or its nvidia/ folder.
  for baton_w in "$baton_p/nvidia/nccl" "$baton_p/nccl"; do
    AS_IF([test -f "$baton_w/include/nccl.h"], [baton_p=$baton_w; break])
  done
  AS_IF([test -f "$baton_p/include/nccl.h"], [],
    [baton_nccl_why="no include/nccl.h under $baton_p"; continue])
  AC_MSG_CHECKING([for NCCL >= 2.18 in $baton_p])
  AS_IF([test "$baton_p" = /usr],
    [baton_n_cpp= baton_n_ld= baton_n_libdir=],
    [baton_n_libdir=
     for baton_d in "$baton_p/lib" "$baton_p/lib64" "$baton_p"/targets/*/lib; do
       for baton_f in "$baton_d"/libnccl.so "$baton_d"/libnccl.so.[[0-9]]*; do
         AS_IF([test -f "$baton_f"], [baton_n_libdir=$baton_d; break])
       done
       AS_IF([test -n "$baton_n_libdir"], [break])
     done
     AS_IF([test -z "$baton_n_libdir"], [AC_MSG_RESULT([no libnccl.so or libnccl.so.N]); baton_nccl_why="no libnccl.so or libnccl.so.N under $baton_p"; continue])
     baton_n_cpp="-I$baton_p/include" baton_n_ld="-L$baton_n_libdir -Wl,-rpath,$baton_n_libdir"])
  CPPFLAGS="$baton_save_CPPFLAGS $baton_n_cpp $CUDA_CPPFLAGS"
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <nccl.h>
#if !defined(NCCL_VERSION_CODE) || !defined(NCCL_VERSION) || NCCL_VERSION_CODE < NCCL_VERSION(2, 18, 0)
#error NCCL too old
#endif]], [[]])], [],
    [AC_MSG_RESULT([no (nccl.h older than 2.18)])
     baton_nccl_why="$baton_p/include/nccl.h is older than 2.18"; continue])
  AC_MSG_RESULT([yes])
  AC_COMPUTE_INT([baton_nccl_v1], [NCCL_MAJOR], [[#include <nccl.h>]], [baton_nccl_v1=?])
  AC_COMPUTE_INT([baton_nccl_v2], [NCCL_MINOR], [[#include <nccl.h>]], [baton_nccl_v2=?])
  AC_COMPUTE_INT([baton_nccl_v3], [NCCL_PATCH], [[#include <nccl.h>]], [baton_nccl_v3=?])
  NCCL_CPPFLAGS=$baton_n_cpp NCCL_LDFLAGS=$baton_n_ld NCCL_LIBS=-lnccl
  baton_have_nccl=yes baton_nccl_libdir=$baton_n_libdir
  baton_nccl_where="$baton_p/include/nccl.h, ${baton_n_libdir:-default library path}"
  break
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
AS_IF([test "$baton_have_nccl" = yes], [AC_SEARCH_LIBS([dlopen], [dl])])
baton_nccl_found_dirs=
for baton_d in "$baton_nccl_libdir" "$baton_cuda_libdir"; do
  AS_IF([test -n "$baton_d"], [baton_nccl_found_dirs="${baton_nccl_found_dirs:+$baton_nccl_found_dirs:}$baton_d"])
done
AC_DEFINE_UNQUOTED([BATON_NCCL_RUNTIME_DIR], ["$with_nccl_runtime"],
  [The folder searched first for libnccl and libcudart at run time (--with-nccl-runtime).])
AC_DEFINE_UNQUOTED([BATON_NCCL_FOUND_DIRS], ["$baton_nccl_found_dirs"],
  [The folders configure found NCCL and the CUDA runtime in, searched last at run time.])
AM_CONDITIONAL([BATON_HAVE_NCCL], [test "$baton_have_nccl" = yes])
AC_SUBST([NCCL_CPPFLAGS])
AC_SUBST([NCCL_LDFLAGS])
AC_SUBST([NCCL_LIBS])
])
