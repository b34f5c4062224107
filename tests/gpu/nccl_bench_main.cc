// The nccl benchmark on one GPU, without MPI: the loop of `baton bench
// collectives --backend nccl` (cli/nccl_bench.cc: baton's collective and the
// raw NCCL call alternated on the same device buffers, medians) for every
// collective, f32 sum plus bf16 all-reduce, 8 bytes to -e (default 64 MiB)
// by factors of 8. Built and run by tests/gpu/run-gpu-tests after the
// correctness test; with one rank busbw is 0 by nccl-tests' factors, so
// the figures to read are time_us against nccl_time_us (baton's overhead).
//
//   nccl_bench [--json] [-e BYTES] [-n ITERS] [-w WARMUP]
//
// Exit 0 when every row checked out, 1 when one did not or a call failed,
// 2 on a bad argument, 77 with "SKIP: no GPU visible (...)" without a GPU.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "cli/byte_size.h"
#include "cli/collective_case.h"
#include "cli/nccl_bench.h"
#include "mpi_runtime/nccl/nccl_api.h"
#include "mpi_runtime/nccl/nccl_communicator.h"
#include "tests/gpu/one_rank.h"

namespace {

using baton::DType;
using baton::ReduceOp;
using baton::Status;
namespace cli = baton::cli;
namespace nccl = baton::nccl;

int Usage(const std::string& why) {
  std::fprintf(stderr, "nccl_bench: %s\nusage: nccl_bench [--json] [-e BYTES] [-n ITERS] [-w WARMUP]\n",
               why.c_str());
  return 2;
}

bool ParseCount(const char* text, long min, long* out) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < min) return false;
  *out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  size_t max_bytes = size_t{64} << 20;
  cli::NcclBenchOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--json") {
      json = true;
    } else if (a == "-e" && v) {
      if (!cli::ParseBytes(v, &max_bytes) || max_bytes == 0) return Usage(std::string("-e: invalid value '") + v + "'");
      ++i;
    } else if (a == "-n" && v) {
      if (!ParseCount(v, 1, &o.iters)) return Usage(std::string("-n: invalid value '") + v + "'");
      ++i;
    } else if (a == "-w" && v) {
      if (!ParseCount(v, 0, &o.warmup)) return Usage(std::string("-w: invalid value '") + v + "'");
      ++i;
    } else {
      return Usage("unknown argument '" + a + "'");
    }
  }

  const nccl::NcclApi* loaded = nullptr;
  if (Status s = nccl::RealNcclApi(&loaded); !s.ok()) {
    std::printf("FAIL: %s\n", s.message().c_str());
    return 1;
  }
  const nccl::NcclApi& api = *loaded;
  int devices = 0;
  if (Status visible = nccl::CheckDeviceVisible(api, &devices); !visible.ok()) {
    std::printf("SKIP: no GPU visible (%s)\n", visible.message().c_str());
    return 77;
  }
  o.raw_timeout = std::chrono::seconds(60);
  std::unique_ptr<nccl::NcclCommunicator> made;
  Status s = nccl::gpu_test::MakeOneRankCommunicator(api, &made);
  if (!s.ok()) {
    std::fprintf(stderr, "nccl_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  std::unique_ptr<cli::RawComm> raw;
  s = cli::RawComm::Make(api, *made, cli::RankSync::OneRank(), &raw);
  if (!s.ok()) {
    std::fprintf(stderr, "nccl_bench: %s\n", s.ToString().c_str());
    return 1;
  }

  struct Sweep {
    cli::Collective coll;
    DType t;
  };
  const Sweep sweeps[] = {{cli::Collective::kAllReduce, DType::kF32},     {cli::Collective::kAllReduce, DType::kBF16},
                          {cli::Collective::kAllGather, DType::kF32},     {cli::Collective::kReduceScatter, DType::kF32},
                          {cli::Collective::kBroadcast, DType::kF32},     {cli::Collective::kAllToAll, DType::kF32}};
  const cli::PrintSpec spec{json, baton::Backend::kNccl, "nccl", 1};
  bool all_ok = true;
  for (const Sweep& w : sweeps) {
    if (!json) {
      std::printf("# %s, %s, sum, 1 rank, iters %ld, warmup %ld: baton's collective then the raw NCCL call\n",
                  cli::CollectiveName(w.coll), std::string(baton::DTypeName(w.t)).c_str(), o.iters, o.warmup);
      cli::PrintHeader(spec);
    }
    for (size_t bytes = 8; bytes <= max_bytes; bytes *= 8) {
      const cli::Case c = cli::Case::For(w.coll, w.t, ReduceOp::kSum, 1, 0, bytes);
      cli::Row row;
      row.algo = row.chosen = baton::Algorithm::kNative;
      s = cli::MeasureNccl(*made, *raw, api, c, o, cli::RankSync::OneRank(), &row);
      if (!s.ok()) {
        std::fprintf(stderr, "nccl_bench: %s %zu bytes: %s\n", cli::CollectiveName(w.coll), bytes,
                     s.ToString().c_str());
        return 1;
      }
      all_ok = all_ok && row.ok == 1;
      cli::PrintRow(spec, c, row);
    }
  }
  if (!all_ok) std::fprintf(stderr, "nccl_bench: results differ from the reference (ok NO above)\n");
  return all_ok ? 0 : 1;
}
