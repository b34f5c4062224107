// The MPI collectives a process makes, counted per kind: an LD_PRELOAD
// library for measuring what one checkpoint save costs in agreement rounds
// (python/bench/count_save_calls.py; docs/benchmarks.md, "The fixed cost of
// a small save, counted"). Each wrapper counts and forwards to PMPI_*; the
// program reads the counts through mpicount_reset() / mpicount_dump(tag)
// (ctypes.CDLL(None)). Every thread's calls count (the runtime's heartbeat
// sends show up as Isend/Irecv). Not built by make:
//   mpicc -shared -fPIC -O1 -o /tmp/libmpicount.so python/bench/mpi_call_counter.c
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <pthread.h>
enum {ALLRED, IALLRED, BCAST, IBCAST, GATHER, GATHERV, ALLGATHER, IALLGATHER, IALLGATHERV, ALLGATHERV, BARRIER, IBARRIER, EXSCAN, REDUCE, ISEND, IRECV, FOPEN, NF};
static const char* names[NF]={"Allreduce","Iallreduce","Bcast","Ibcast","Gather","Gatherv","Allgather","Iallgather","Iallgatherv","Allgatherv","Barrier","Ibarrier","Exscan","Reduce","Isend","Irecv","File_open"};
static long cnt[NF];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static void inc(int i){pthread_mutex_lock(&mu);cnt[i]++;pthread_mutex_unlock(&mu);}
void mpicount_reset(void){pthread_mutex_lock(&mu);memset(cnt,0,sizeof cnt);pthread_mutex_unlock(&mu);}
void mpicount_dump(const char* tag){int r=0;PMPI_Comm_rank(MPI_COMM_WORLD,&r);char buf[1024];int n=snprintf(buf,sizeof buf,"MPICOUNT rank %d %s:",r,tag);
 for(int i=0;i<NF;i++) if(cnt[i]) n+=snprintf(buf+n,sizeof buf-n," %s=%ld",names[i],cnt[i]); fprintf(stderr,"%s\n",buf);}
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
int MPI_Isend(const void*a,int c,MPI_Datatype d,int dst,int t,MPI_Comm m,MPI_Request*r){inc(ISEND);return PMPI_Isend(a,c,d,dst,t,m,r);}
int MPI_Irecv(void*a,int c,MPI_Datatype d,int s,int t,MPI_Comm m,MPI_Request*r){inc(IRECV);return PMPI_Irecv(a,c,d,s,t,m,r);}
int MPI_File_open(MPI_Comm m,const char*f,int a,MPI_Info i,MPI_File*fh){inc(FOPEN);return PMPI_File_open(m,f,a,i,fh);}
