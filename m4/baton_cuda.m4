# baton_cuda.m4 -- BATON_CHECK_CUDA
#
# Checks for the CUDA runtime (optional): cuda_runtime_api.h and a link test
# of cudaGetDeviceCount with -lcudart (link only: no GPU is needed).
# Candidates (auto/yes): /usr/local/cuda, $CUDA_HOME, $CUDA_PATH, then /usr.
# The library dir (lib64, lib or targets/<arch>/lib) is also put in the rpath.
#
# Option:   --with-cuda=PATH|yes|no   default: auto (not found -> notice, off);
#                                     PATH or yes that fails -> error.
# AC_SUBST: CUDA_CPPFLAGS CUDA_LDFLAGS CUDA_LIBS
# Defines:  BATON_HAVE_CUDA 0/1 (AC_DEFINE_UNQUOTED), AM_CONDITIONAL BATON_HAVE_CUDA
# Shell:    baton_have_cuda=yes|no, baton_cuda_prefix, baton_cuda_libdir,
#           baton_summary_cuda  e.g. "CUDA runtime 13.0 (/usr/local/cuda)"
AC_DEFUN([BATON_CHECK_CUDA], [
AC_ARG_WITH([cuda],
  [AS_HELP_STRING([--with-cuda=PATH|yes|no],
    [CUDA toolkit prefix (default: auto: /usr/local/cuda, $CUDA_HOME, $CUDA_PATH)])],
  [], [with_cuda=auto])
CUDA_CPPFLAGS= CUDA_LDFLAGS= CUDA_LIBS= baton_have_cuda=no baton_cuda_prefix= baton_cuda_libdir=
baton_cuda_why="not found"
AS_CASE([$with_cuda],
  [no], [baton_cuda_cands= baton_cuda_why="disabled by --without-cuda"],
  [yes|auto], [baton_cuda_cands="/usr/local/cuda $CUDA_HOME $CUDA_PATH /usr"],
  [AS_IF([test -d "$with_cuda"], [],
     [AC_MSG_ERROR([--with-cuda=$with_cuda: directory does not exist (expected a CUDA toolkit prefix with include/cuda_runtime_api.h and lib64/libcudart.so)])])
   baton_cuda_cands=$with_cuda])
baton_save_CPPFLAGS=$CPPFLAGS baton_save_LDFLAGS=$LDFLAGS baton_save_LIBS=$LIBS
baton_cuda_seen=
for baton_p in $baton_cuda_cands; do
  AS_CASE([" $baton_cuda_seen "], [*" $baton_p "*], [continue])
  baton_cuda_seen="$baton_cuda_seen $baton_p"
  AS_IF([test -f "$baton_p/include/cuda_runtime_api.h"], [],
    [baton_cuda_why="no include/cuda_runtime_api.h under $baton_p"; continue])
  AC_MSG_CHECKING([for the CUDA runtime in $baton_p])
  AS_IF([test "$baton_p" = /usr],
    [baton_c_cpp= baton_c_ld= baton_c_libdir=],
    [baton_c_libdir=
     for baton_d in "$baton_p/lib64" "$baton_p/lib" "$baton_p"/targets/*/lib; do
       AS_IF([test -f "$baton_d/libcudart.so"], [baton_c_libdir=$baton_d; break])
     done
     AS_IF([test -z "$baton_c_libdir"], [AC_MSG_RESULT([no libcudart.so]); baton_cuda_why="no libcudart.so under $baton_p"; continue])
     baton_c_cpp="-I$baton_p/include" baton_c_ld="-L$baton_c_libdir -Wl,-rpath,$baton_c_libdir"])
  CPPFLAGS="$baton_save_CPPFLAGS $baton_c_cpp" LDFLAGS="$baton_save_LDFLAGS $baton_c_ld" LIBS="-lcudart $baton_save_LIBS"
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cuda_runtime_api.h>]],
    [[int n = 0; return cudaGetDeviceCount(&n) == cudaSuccess ? 0 : 1;]])],
    [AC_MSG_RESULT([yes])
     AC_COMPUTE_INT([baton_cudart_ver], [CUDART_VERSION], [[#include <cuda_runtime_api.h>]], [baton_cudart_ver=0])
     CUDA_CPPFLAGS=$baton_c_cpp CUDA_LDFLAGS=$baton_c_ld CUDA_LIBS=-lcudart
     baton_have_cuda=yes baton_cuda_prefix=$baton_p baton_cuda_libdir=$baton_c_libdir
     break],
    [AC_MSG_RESULT([no])
     baton_cuda_why="cannot link cudaGetDeviceCount with -lcudart in $baton_p (see config.log)"])
done
CPPFLAGS=$baton_save_CPPFLAGS LDFLAGS=$baton_save_LDFLAGS LIBS=$baton_save_LIBS
AS_IF([test "$baton_have_cuda" = yes],
  [baton_summary_cuda="CUDA runtime `expr $baton_cudart_ver / 1000`.`expr $baton_cudart_ver % 1000 / 10` ($baton_cuda_prefix, libcudart in ${baton_c_libdir:-default path})"
   baton_cuda_val=1],
  [AS_CASE([$with_cuda],
     [no|auto], [AS_IF([test "$with_cuda" = auto],
                   [AC_MSG_NOTICE([CUDA runtime not found (tried: $baton_cuda_cands): building without CUDA; use --with-cuda=PATH to point at it])])],
     [AC_MSG_ERROR([CUDA was requested (--with-cuda=$with_cuda) but is unusable: $baton_cuda_why (tried: $baton_cuda_cands). Install the CUDA toolkit (cuda_runtime_api.h, libcudart.so; Debian: nvidia-cuda-toolkit) or fix --with-cuda=PATH])])
   baton_summary_cuda="no ($baton_cuda_why)"
   baton_cuda_val=0])
AC_DEFINE_UNQUOTED([BATON_HAVE_CUDA], [$baton_cuda_val], [Define to 1 if the CUDA runtime is available, 0 otherwise.])
AM_CONDITIONAL([BATON_HAVE_CUDA], [test "$baton_have_cuda" = yes])
AC_SUBST([CUDA_CPPFLAGS])
AC_SUBST([CUDA_LDFLAGS])
AC_SUBST([CUDA_LIBS])
])
