// The calls one checkpoint save or restore makes beyond its bytes, counted
// per kind: an LD_PRELOAD library (python/bench/count_save_calls.py;
// docs/benchmarks.md, "The fixed cost of a small save, counted").
//  - MPI: each wrapper of MPI's profiling interface counts and forwards to
//    PMPI_* (the collectives, the point-to-point calls of the runtime's
//    heartbeats: every thread's calls count; HDF5's own MPI-IO calls too);
//  - POSIX, through dlsym(RTLD_NEXT): fsync/fdatasync, files created
//    (open with O_CREAT), JSON files opened to read (the manifests and
//    indexes: one JSON parse each), other opens, renames, directory
//    listings (opendir/fdopendir), mkdir, unlink, threads started
//    (pthread_create). Calls glibc makes inside itself (fopen's own open)
//    are not seen: the counts are of what baton, HDF5 and MPI call.
// The program reads the counts through mpicount_reset() / mpicount_dump(tag)
// (ctypes.CDLL(None)). Not built by make:
//   mpicc -shared -fPIC -O1 -o /tmp/libmpicount.so python/bench/mpi_call_counter.c -ldl
#define _GNU_SOURCE
#include <mpi.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
enum {ALLRED, IALLRED, BCAST, IBCAST, GATHER, GATHERV, ALLGATHER, IALLGATHER, IALLGATHERV, ALLGATHERV, BARRIER, IBARRIER,
      EXSCAN, REDUCE, ALLTOALL, ISEND, IRECV, COMMDUP, COMMIDUP, COMMSPLIT, FOPEN,
      FSYNC, FDATASYNC, CREATE, OPENJSON, OPENOTHER, RENAME, LISTDIR, MKDIR, UNLINK, THREAD, NF};
static const char* names[NF]={"Allreduce","Iallreduce","Bcast","Ibcast","Gather","Gatherv","Allgather","Iallgather",
    "Iallgatherv","Allgatherv","Barrier","Ibarrier","Exscan","Reduce","Alltoall","Isend","Irecv","Comm_dup","Comm_idup",
    "Comm_split","File_open","fsync","fdatasync","create","open_json","open_other","rename","listdir","mkdir","unlink",
    "thread"};
// The MPI calls that are collectives over a communicator (a round every rank waits for).
static const int collective[]={ALLRED,IALLRED,BCAST,IBCAST,GATHER,GATHERV,ALLGATHER,IALLGATHER,IALLGATHERV,ALLGATHERV,
    BARRIER,IBARRIER,EXSCAN,REDUCE,ALLTOALL,COMMDUP,COMMIDUP,COMMSPLIT,FOPEN};
static long cnt[NF];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void inc(int i){pthread_mutex_lock(&mu);cnt[i]++;pthread_mutex_unlock(&mu);}
void mpicount_reset(void){pthread_mutex_lock(&mu);memset(cnt,0,sizeof cnt);pthread_mutex_unlock(&mu);}
void mpicount_dump(const char* tag){int r=0;PMPI_Comm_rank(MPI_COMM_WORLD,&r);char buf[2048];
 long coll=0; for(unsigned i=0;i<sizeof collective/sizeof collective[0];i++) coll+=cnt[collective[i]];
 int n=snprintf(buf,sizeof buf,"MPICOUNT rank %d %s: collectives=%ld",r,tag,coll);
 for(int i=0;i<NF;i++) if(cnt[i]) n+=snprintf(buf+n,sizeof buf-n," %s=%ld",names[i],cnt[i]);
 fprintf(stderr,"%s\n",buf);}
int MPI_Allreduce(const void*a,void*b,int c,MPI_Datatype d,MPI_Op o,MPI_Comm m){inc(ALLRED);return PMPI_Allreduce(a,b,c,d,o,m);}
int MPI_Iallreduce(const void*a,void*b,int c,MPI_Datatype d,MPI_Op o,MPI_Comm m,MPI_Request*r){inc(IALLRED);return PMPI_Iallreduce(a,b,c,d,o,m,r);}
int MPI_Bcast(void*a,int c,MPI_Datatype d,int root,MPI_Comm m){inc(BCAST);return PMPI_Bcast(a,c,d,root,m);}
int MPI_Ibcast(void*a,int c,MPI_Datatype d,int root,MPI_Comm m,MPI_Request*r){inc(IBCAST);return PMPI_Ibcast(a,c,d,root,m,r);}
int MPI_Gather(const void*a,int c,MPI_Datatype d,void*b,int c2,MPI_Datatype d2,int root,MPI_Comm m){inc(GATHER);return PMPI_Gather(a,c,d,b,c2,d2,root,m);}
int MPI_Gatherv(const void*a,int c,MPI_Datatype d,void*b,const int*c2,const int*ds,MPI_Datatype d2,int root,MPI_Comm m){inc(GATHERV);return PMPI_Gatherv(a,c,d,b,c2,ds,d2,root,m);}
int MPI_Allgather(const void*a,int c,MPI_Datatype d,void*b,int c2,MPI_Datatype d2,MPI_Comm m){inc(ALLGATHER);return PMPI_Allgather(a,c,d,b,c2,d2,m);}
int MPI_Iallgather(const void*a,int c,MPI_Datatype d,void*b,int c2,MPI_Datatype d2,MPI_Comm m,MPI_Request*r){inc(IALLGATHER);return PMPI_Iallgather(a,c,d,b,c2,d2,m,r);}
int MPI_Iallgatherv(const void*a,int c,MPI_Datatype d,void*b,const int*c2,const int*ds,MPI_Datatype d2,MPI_Comm m,MPI_Request*r){inc(IALLGATHERV);return PMPI_Iallgatherv(a,c,d,b,c2,ds,d2,m,r);}
int MPI_Allgatherv(const void*a,int c,MPI_Datatype d,void*b,const int*c2,const int*ds,MPI_Datatype d2,MPI_Comm m){inc(ALLGATHERV);return PMPI_Allgatherv(a,c,d,b,c2,ds,d2,m);}
int MPI_Barrier(MPI_Comm m){inc(BARRIER);return PMPI_Barrier(m);}
int MPI_Ibarrier(MPI_Comm m,MPI_Request*r){inc(IBARRIER);return PMPI_Ibarrier(m,r);}
int MPI_Exscan(const void*a,void*b,int c,MPI_Datatype d,MPI_Op o,MPI_Comm m){inc(EXSCAN);return PMPI_Exscan(a,b,c,d,o,m);}
int MPI_Reduce(const void*a,void*b,int c,MPI_Datatype d,MPI_Op o,int root,MPI_Comm m){inc(REDUCE);return PMPI_Reduce(a,b,c,d,o,root,m);}
int MPI_Alltoall(const void*a,int c,MPI_Datatype d,void*b,int c2,MPI_Datatype d2,MPI_Comm m){inc(ALLTOALL);return PMPI_Alltoall(a,c,d,b,c2,d2,m);}
int MPI_Isend(const void*a,int c,MPI_Datatype d,int dst,int t,MPI_Comm m,MPI_Request*r){inc(ISEND);return PMPI_Isend(a,c,d,dst,t,m,r);}
int MPI_Irecv(void*a,int c,MPI_Datatype d,int s,int t,MPI_Comm m,MPI_Request*r){inc(IRECV);return PMPI_Irecv(a,c,d,s,t,m,r);}
int MPI_Comm_dup(MPI_Comm m,MPI_Comm*n){inc(COMMDUP);return PMPI_Comm_dup(m,n);}
int MPI_Comm_idup(MPI_Comm m,MPI_Comm*n,MPI_Request*r){inc(COMMIDUP);return PMPI_Comm_idup(m,n,r);}
int MPI_Comm_split(MPI_Comm m,int c,int k,MPI_Comm*n){inc(COMMSPLIT);return PMPI_Comm_split(m,c,k,n);}
int MPI_File_open(MPI_Comm m,const char*f,int a,MPI_Info i,MPI_File*fh){inc(FOPEN);return PMPI_File_open(m,f,a,i,fh);}

// POSIX, forwarded to the next definition (libc's).
#define NEXT(type, name, args) static type (*real) args; if (!real) real = (type (*) args)dlsym(RTLD_NEXT, #name)
static int is_json(const char* p){size_t n=p?strlen(p):0;return n>=5&&strcmp(p+n-5,".json")==0;}
static void count_open(const char* p,int flags){inc((flags&O_CREAT)?CREATE:is_json(p)?OPENJSON:OPENOTHER);}
int fsync(int fd){NEXT(int,fsync,(int));inc(FSYNC);return real(fd);}
int fdatasync(int fd){NEXT(int,fdatasync,(int));inc(FDATASYNC);return real(fd);}
int open(const char* p,int f,...){NEXT(int,open,(const char*,int,...));mode_t m=0;
 if(f&(O_CREAT|O_TMPFILE)){va_list a;va_start(a,f);m=va_arg(a,mode_t);va_end(a);}count_open(p,f);return real(p,f,m);}
int open64(const char* p,int f,...){NEXT(int,open64,(const char*,int,...));mode_t m=0;
 if(f&(O_CREAT|O_TMPFILE)){va_list a;va_start(a,f);m=va_arg(a,mode_t);va_end(a);}count_open(p,f);return real(p,f,m);}
int openat(int d,const char* p,int f,...){NEXT(int,openat,(int,const char*,int,...));mode_t m=0;
 if(f&(O_CREAT|O_TMPFILE)){va_list a;va_start(a,f);m=va_arg(a,mode_t);va_end(a);}count_open(p,f);return real(d,p,f,m);}
int openat64(int d,const char* p,int f,...){NEXT(int,openat64,(int,const char*,int,...));mode_t m=0;
 if(f&(O_CREAT|O_TMPFILE)){va_list a;va_start(a,f);m=va_arg(a,mode_t);va_end(a);}count_open(p,f);return real(d,p,f,m);}
int rename(const char* a,const char* b){NEXT(int,rename,(const char*,const char*));inc(RENAME);return real(a,b);}
int renameat(int d,const char* a,int e,const char* b){NEXT(int,renameat,(int,const char*,int,const char*));inc(RENAME);return real(d,a,e,b);}
int renameat2(int d,const char* a,int e,const char* b,unsigned f){NEXT(int,renameat2,(int,const char*,int,const char*,unsigned));inc(RENAME);return real(d,a,e,b,f);}
DIR* opendir(const char* p){NEXT(DIR*,opendir,(const char*));inc(LISTDIR);return real(p);}
DIR* fdopendir(int fd){NEXT(DIR*,fdopendir,(int));inc(LISTDIR);return real(fd);}
int mkdir(const char* p,mode_t m){NEXT(int,mkdir,(const char*,mode_t));inc(MKDIR);return real(p,m);}
int mkdirat(int d,const char* p,mode_t m){NEXT(int,mkdirat,(int,const char*,mode_t));inc(MKDIR);return real(d,p,m);}
int unlink(const char* p){NEXT(int,unlink,(const char*));inc(UNLINK);return real(p);}
int unlinkat(int d,const char* p,int f){NEXT(int,unlinkat,(int,const char*,int));inc(UNLINK);return real(d,p,f);}
int rmdir(const char* p){NEXT(int,rmdir,(const char*));inc(UNLINK);return real(p);}
int pthread_create(pthread_t* t,const pthread_attr_t* a,void*(*f)(void*),void* x){
 NEXT(int,pthread_create,(pthread_t*,const pthread_attr_t*,void*(*)(void*),void*));inc(THREAD);return real(t,a,f,x);}
