// One measured case of `baton bench collectives`: which collective, its
// sizes and bus-bandwidth factor, the inputs every rank fills, the
// reference result it checks against, and the printed row (table or
// JSON). Shared by the mpi side (cli/bench_collectives.cc) and the nccl
// side (cli/nccl_bench.cc), and MPI-free so that tests/gpu can build the
// nccl benchmark on a machine without MPI.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "baton/communicator.h"
#include "baton/dtype.h"

namespace baton::cli {

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kAllToAll };
inline constexpr const char* kCollectiveNames[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast",
                                                    "all_to_all"};
inline const char* CollectiveName(Collective c) { return kCollectiveNames[static_cast<int>(c)]; }
// "all_reduce" -> kAllReduce; false for anything else.
bool ParseCollective(const std::string& text, Collective* c);

struct Case {
  Collective coll = Collective::kAllReduce;
  DType t = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
  int P = 1, R = 0;
  size_t block = 0;  // elements per rank's block (all of the buffer for all_reduce/broadcast)

  // The case for a size column of `bytes`: whole elements (whole blocks
  // for the per-rank collectives), at least one.
  static Case For(Collective coll, DType t, ReduceOp op, int P, int R, size_t bytes);
  size_t total() const;  // elements in the size column (nccl-tests' count)
  size_t bytes() const { return total() * DTypeSize(t); }
  size_t send_elems() const;
  size_t recv_elems() const;
  bool reduces() const { return coll == Collective::kAllReduce || coll == Collective::kReduceScatter; }
  // nccl-tests' PERFORMANCE.md: busbw = algbw * factor.
  double BusFactor() const;
};

// Host buffers of one case, one byte longer than needed (never empty).
struct HostBuffers {
  std::vector<char> send, recv, want;
};

// Small integer inputs, (7r + 3i) mod 5, keep every sum exact in every
// dtype up to 64 ranks (bf16 holds integers to 256); f16/bf16 results are
// rounded once from f32, as the mpi backend promises, so its check is
// bit-exact. Fills send with this rank's input, want with the reference
// and recv with zeros (root 0's input for broadcast, which is in place).
void Fill(const Case& c, HostBuffers* b);

// Runs the case's collective on `comm` (host or device pointers alike).
Status RunCollective(Communicator& comm, const Case& c, const void* send, void* recv);

// Whether `got` matches the reference: bit for bit, except avg on floating
// types, where NCCL's own average (scaling before or after its sum, in the
// element type) may differ by rounding: there each element may be off by
// 2^-6 relative (two units in the last place of bf16; tighter types get
// far closer). Returns the first differing element's index, or -1.
long FirstMismatch(const Case& c, const void* got, const void* want);

// A printed row.
struct Row {
  Algorithm algo = Algorithm::kAuto;
  Algorithm chosen = Algorithm::kAuto;  // what auto ran (mpi backend)
  double time_us = 0;
  double raw_time_us = 0;  // the raw library call on the same buffers
  int ok = -1;             // -1 not checked
};

struct PrintSpec {
  bool json = false;
  Backend backend = Backend::kMpi;
  const char* raw = "mpi";  // the library timed beside baton: "mpi" or "nccl"
  int nodes = 1;
};

double GBps(size_t bytes, double us);
// The table's column titles (after a "#" preamble the caller prints).
void PrintHeader(const PrintSpec& spec);
// One row: a table line, or one JSON object with collective, backend,
// algo (auto_algo), op, dtype, bytes, count, ranks, nodes, time_us,
// algbw, busbw, bus_factor, ok, raw, and <raw>_time_us, <raw>_busbw,
// <raw>_ratio (mpi_time_us ... for the mpi backend; the nccl backend's
// rows carry nccl_time_us ... and mpi_time_us null).
void PrintRow(const PrintSpec& spec, const Case& c, const Row& r);

}  // namespace baton::cli
