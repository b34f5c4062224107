// Collectives over a group of ranks, with two backends:
//   mpi   host memory, over MPI; algorithms native (MPI's own),
//         hierarchical (reduce in the node, all-reduce among the node
//         leaders, broadcast in the node) and ring (reduce-scatter then
//         all-gather over point-to-point, in pipelined chunks);
//   nccl  device memory, NCCL communicators bootstrapped from MPI.
// Every call returns a Status; none aborts the process.
//
// Counts are in elements. all_gather/reduce_scatter/all_to_all take the
// count of ONE rank's block; buffers hold size() blocks where the
// operation needs them. all_gather_v/reduce_scatter_v take one count per
// rank (blocks of different lengths, e.g. 161 rows over 3 ranks). The mpi
// backend reduces f16 and bf16 in f32 and rounds once; NCCL reduces in the
// element type.
//
// Threading: one thread issues the collectives of a communicator (as in
// MPI); a non-blocking call's Request may be waited on from that thread.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "baton/dtype.h"
#include "baton/health.h"
#include "baton/runtime.h"
#include "baton/status.h"

namespace baton {

enum class Backend { kMpi, kNccl, kAuto };
enum class Algorithm { kNative, kHierarchical, kRing, kAuto };

std::string_view BackendName(Backend b);
std::string_view AlgorithmName(Algorithm a);
Status ParseBackend(std::string_view text, Backend* b);
Status ParseAlgorithm(std::string_view text, Algorithm* a);
// The algorithm a communicator runs: `option` when set, else
// BATON_ALGORITHM (native, hierarchical, ring or auto), else kNative. A bad
// value is an InvalidArgument naming it.
Status ResolveAlgorithm(std::optional<Algorithm> option, Algorithm* out);

struct CommOptions {
  // Where the buffers must live: kMpi host memory (device memory is an
  // InvalidArgument where baton was built with CUDA, asked of CUDA only in
  // a process that has a CUDA context), kNccl device memory of the
  // communicator's device (host memory unknown to CUDA is refused). kAuto:
  // nccl when every rank sees a GPU, else mpi, so a program that passes
  // host buffers asks for kMpi.
  Backend backend = Backend::kAuto;
  // mpi backend only. Unset: BATON_ALGORITHM, else kNative. Native,
  // hierarchical and ring each add in a fixed order, so a program's sums
  // are the same bits run after run at the same job shape; the three
  // differ from each other in the last bits of floating sums. kAuto picks
  // per message size, from the tuning table or by measuring in the job
  // (then keep its decisions in BATON_AUTO_FILE so that a requeued run
  // picks the same); see man 3 baton, REPRODUCIBILITY.
  std::optional<Algorithm> algorithm;
  // Ring pipelining: each segment moves in chunks of this many bytes.
  size_t ring_chunk_bytes = 1 << 20;
  // Deadline of every collective, blocking or not (from its start to its
  // completion), in seconds: 0 = BATON_COLLECTIVE_TIMEOUT, else 600. A bad
  // value is an InvalidArgument from CreateCommunicator naming it.
  double timeout = 0;
  // On expiry: kExit logs the timeout (collective, bytes, step, ranks not
  // answering heartbeats) and ends the process with 75 at once; kReturn
  // returns Status::Timeout with that text. Either way the communicator
  // is then broken: with nccl it is aborted (ncclCommAbort) first; with
  // mpi the late collective stays in flight inside MPI (MPI cannot cancel
  // a collective), its buffers may still be written, and every later call
  // returns the same Timeout at once. Make a new communicator or, better,
  // exit 75 and let Slurm requeue the job.
  OnTimeout on_timeout = OnTimeout::kExit;

  // The nccl backend's own (the deadline of its collectives is `timeout`).
  struct Nccl {
    // CUDA device; -1: the current device where the program already made
    // it current (its primary context exists), else local rank modulo the
    // visible devices.
    int device = -1;
    // Creating the NCCL communicator, seconds; 0: 120.
    double init_timeout = 0;
    // The cudaStream_t whose work every collective follows (null: the
    // legacy default stream); see Request::WaitOnStream for the way back.
    void* stream = nullptr;
  } nccl;
};

// A non-blocking collective in flight. Destroying an unfinished Request
// waits for it (the buffers must outlive it either way).
class Request {
 public:
  virtual ~Request() = default;
  virtual Status Wait() = 0;
  // Sets *done; once done, returns the collective's Status.
  virtual Status Test(bool* done) = 0;
  // Makes the CUDA stream `stream` (a cudaStream_t) wait for the
  // collective on the device instead of blocking the host: work queued on
  // it afterwards sees the result. nccl: cudaStreamWaitEvent on the
  // collective's own event; its deadline stays watched by the
  // communicator's watchdog, and destroying the Request then no longer
  // waits. The mpi backend has no device work: it waits (Wait()).
  virtual Status WaitOnStream(void* stream) {
    (void)stream;
    return Wait();
  }
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual Backend backend() const = 0;
  // The CUDA device the communicator's collectives run on (nccl: the one
  // chosen at creation, see CommOptions::nccl.device); -1 for mpi, which
  // has no device. A program that allocates its buffers here passes the
  // nccl backend's buffer check.
  virtual int device() const = 0;

  virtual Status AllReduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) = 0;
  virtual Status AllGather(const void* send, void* recv, size_t count, DType dtype) = 0;
  virtual Status ReduceScatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op) = 0;
  virtual Status Broadcast(void* buffer, size_t count, DType dtype, int root) = 0;
  virtual Status AllToAll(const void* send, void* recv, size_t count, DType dtype) = 0;
  virtual Status Barrier() = 0;

  // Uneven blocks: `counts` has size() entries, the same on every rank
  // (InvalidArgument otherwise, where it can be seen), and block r starts
  // at element counts[0] + ... + counts[r-1].
  // AllGatherV: `send` holds counts[rank()] elements, `recv` every block.
  virtual Status AllGatherV(const void* send, void* recv, const std::vector<size_t>& counts, DType dtype) = 0;
  // ReduceScatterV: `send` holds every block; `recv` gets this rank's block
  // (counts[rank()] elements) reduced over the ranks.
  virtual Status ReduceScatterV(const void* send, void* recv, const std::vector<size_t>& counts, DType dtype,
                                ReduceOp op) = 0;

  // Non-blocking forms: the same semantics, completed through the Request.
  virtual Status IAllReduce(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                            std::unique_ptr<Request>* request) = 0;
  virtual Status IAllGather(const void* send, void* recv, size_t count, DType dtype,
                            std::unique_ptr<Request>* request) = 0;
  virtual Status IReduceScatter(const void* send, void* recv, size_t count, DType dtype, ReduceOp op,
                                std::unique_ptr<Request>* request) = 0;
  virtual Status IBroadcast(void* buffer, size_t count, DType dtype, int root,
                            std::unique_ptr<Request>* request) = 0;
  virtual Status IAllToAll(const void* send, void* recv, size_t count, DType dtype,
                           std::unique_ptr<Request>* request) = 0;
  virtual Status IBarrier(std::unique_ptr<Request>* request) = 0;
  // (`counts` is copied: it need not outlive the call.)
  virtual Status IAllGatherV(const void* send, void* recv, const std::vector<size_t>& counts, DType dtype,
                             std::unique_ptr<Request>* request) = 0;
  virtual Status IReduceScatterV(const void* send, void* recv, const std::vector<size_t>& counts, DType dtype,
                                 ReduceOp op, std::unique_ptr<Request>* request) = 0;
};

// A communicator over the runtime's world. Collective over the world. The
// runtime must outlive it (timeouts name its step and silent ranks).
Status CreateCommunicator(Runtime& runtime, const CommOptions& options, std::unique_ptr<Communicator>* out);

}  // namespace baton
