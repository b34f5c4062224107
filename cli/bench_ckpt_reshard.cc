// baton bench ckpt --reshard save|restore: the bytes each rank reads when
// a restore reshards, over two launches of different sizes (8 -> 4, 4 -> 8).
//
//   mpirun -n 8 baton bench ckpt --reshard save --dir D
//   mpirun -n 4 baton bench ckpt --reshard restore --dir D
//
// --arrays sharded f32 arrays of --bytes in all (1 KiB rows, the global
// shape independent of the world size, each rank an even split of the
// rows) plus one replicated array of --replicated bytes; the save launch
// writes one version into D/baton-bench-ckpt-reshard, the restore launch
// restores it at its own size, checks every value and prints, over ranks,
// the bytes each rank needs (its rows and the replicated array) and the
// bytes it read from shard files (CheckpointStats::bytes_read: a chunk is
// read whole to verify it), then removes the version (--no-cleanup keeps
// it for another restore).
#include <mpi.h>
#include <unistd.h>

#include <boost/program_options.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "baton/checkpointer.h"
#include "baton/runtime.h"
#include "ckpt/layout.h"
#include "cli/bench_options.h"
#include "cli/byte_size.h"
#include "cli/commands.h"

namespace baton::cli {
namespace {

namespace po = boost::program_options;
namespace stdfs = std::filesystem;
constexpr const char* kCmd = "baton bench ckpt --reshard";

struct Options : CkptBenchOptions {
  std::string phase;
  std::string replicated_text = "16M";
  size_t replicated = 0;
  int group_size = 0;
  bool no_cleanup = false;
};

int ParseOptions(const std::vector<std::string>& args, Options* o) {
  po::options_description desc("baton bench ckpt --reshard options");
  desc.add_options()("reshard", po::value(&o->phase), "save (this launch writes) or restore (this launch reads)");
  AddCkptBenchHead(&desc, o, "1G");
  desc.add_options()
      ("replicated", po::value(&o->replicated_text), "bytes of the replicated array, default 16M (0: none)")
      ("group-size", po::value(&o->group_size), "save: ranks per shard file, 0 = one per node (default)");
  AddCkptBenchTail(&desc, o, "unused (one save, one restore)", "directory on the file system (default $BATON_CKPT_DIR)");
  desc.add_options()
      ("no-cleanup", po::bool_switch(&o->no_cleanup), "restore: keep the version for another restore")
      ("help,h", "print this text");
  po::variables_map vm;
  if (int rc = ParseBenchArgs(kCmd, "mpirun -n N baton bench ckpt --reshard save|restore [OPTIONS]", desc, args, &vm);
      rc != 0)
    return rc;
  if (o->phase != "save" && o->phase != "restore") return BadBenchValue(kCmd, "--reshard", o->phase, "save or restore");
  if (int rc = CheckCkptBenchOptions(kCmd, o); rc != 0) return rc;
  if (!ParseBytes(o->replicated_text, &o->replicated))
    return BadBenchValue(kCmd, "--replicated", o->replicated_text, "a byte count such as 16M");
  if (o->group_size < 0) return BadBenchValue(kCmd, "--group-size", std::to_string(o->group_size), "an integer >= 0");
  return 0;
}

// The value of element `col` of global row `row` of array `a`: every
// restored value is checked against it.
float Value(int a, uint64_t row, uint64_t col) {
  return static_cast<float>((row * kBenchRowFloats + col) % 1000003) + static_cast<float>(a) * 0.25f;
}

}  // namespace

int BenchCkptReshardCommand(const std::vector<std::string>& args) {
  Options o;
  if (int rc = ParseOptions(args, &o); rc != 0) return rc < 0 ? 0 : rc;
  std::unique_ptr<Runtime> rt;
  if (Status s = Runtime::Create(nullptr, nullptr, {}, &rt); !s.ok()) {
    std::cerr << kCmd << ": " << s << "\n";
    return 1;
  }
  const MPI_Comm world = rt->world_comm();
  const int P = rt->size(), R = rt->rank();
  const bool save = o.phase == "save";
  const uint64_t row_bytes = kBenchRowFloats * 4;
  const uint64_t rows = std::max<uint64_t>(1, o.bytes / static_cast<uint64_t>(o.arrays) / row_bytes);  // global
  const uint64_t rep_rows = o.replicated / row_bytes;
  uint64_t first = 0, mine = 0;
  ckpt::ReplicatedRows(rows, P, R, &first, &mine);  // an even split of the sharded rows
  std::vector<std::vector<float>> arrays(static_cast<size_t>(o.arrays) + (rep_rows > 0 ? 1 : 0));
  for (size_t i = 0; i < arrays.size(); ++i) {
    const bool rep = i == static_cast<size_t>(o.arrays);
    const uint64_t n = rep ? rep_rows : mine, base = rep ? 0 : first;
    arrays[i].assign(std::max<uint64_t>(n, 1) * kBenchRowFloats, 0.0f);
    if (save)
      for (uint64_t r = 0; r < n; ++r)
        for (uint64_t c = 0; c < kBenchRowFloats; ++c)
          arrays[i][r * kBenchRowFloats + c] = Value(static_cast<int>(i), base + r, c);
  }
  CheckpointOptions co;
  co.dir = o.dir + "/baton-bench-ckpt-reshard";
  co.group_size = o.group_size;
  co.keep = 1;
  std::unique_ptr<Checkpointer> ck;
  Status s = Checkpointer::Create(*rt, co, &ck);
  for (int i = 0; s.ok() && i < o.arrays; ++i)
    s = ck->RegisterSharded("array" + std::to_string(i), arrays[static_cast<size_t>(i)].data(), DType::kF32,
                            {rows, kBenchRowFloats}, first, mine);
  if (s.ok() && rep_rows > 0)
    s = ck->RegisterReplicated("replicated", arrays.back().data(), DType::kF32, {rep_rows, kBenchRowFloats});
  double t = 0;
  if (!SlowestRank(world, 0, !s.ok(), &t)) return BenchFailed(kCmd, s.ok() ? "" : s.ToString(), R);
  MPI_Barrier(world);
  const double t0 = MPI_Wtime();
  RestoreOptions ro;
  ro.drop_rank_state_on_resize = true;
  RestoreResult result;
  s = save ? ck->Save(1) : ck->Restore(ro, &result);
  std::string err = s.ok() ? "" : s.ToString();
  if (s.ok() && !save && result.step != std::optional<int64_t>(1))
    err = "nothing restored: run --reshard save first, into the same --dir";
  if (!SlowestRank(world, MPI_Wtime() - t0, !err.empty(), &t)) return BenchFailed(kCmd, err, R);
  if (save) {
    if (R == 0 && !o.json)
      std::printf("# %d ranks saved %llu sharded + %llu replicated bytes into %s; restore it at another size with "
                  "--reshard restore\n",
                  P, static_cast<unsigned long long>(rows * row_bytes * static_cast<uint64_t>(o.arrays)),
                  static_cast<unsigned long long>(rep_rows * row_bytes), co.dir.c_str());
    return 0;
  }
  uint64_t wrong = 0;
  for (size_t i = 0; i < arrays.size(); ++i) {
    const bool rep = i == static_cast<size_t>(o.arrays);
    const uint64_t n = rep ? rep_rows : mine, base = rep ? 0 : first;
    for (uint64_t r = 0; r < n; ++r)
      for (uint64_t c = 0; c < kBenchRowFloats; ++c)
        wrong += arrays[i][r * kBenchRowFloats + c] != Value(static_cast<int>(i), base + r, c);
  }
  const CheckpointStats st = ck->last_stats();
  // Per rank: the bytes it needs from the files (its sharded rows and its
  // part of the replicated array, the rest gathered) and the bytes read.
  uint64_t in[3] = {st.bytes, st.bytes_read, wrong}, mx[3] = {0, 0, 0}, mn[3] = {0, 0, 0}, sum[3] = {0, 0, 0};
  MPI_Allreduce(in, mx, 3, MPI_UINT64_T, MPI_MAX, world);
  MPI_Allreduce(in, mn, 3, MPI_UINT64_T, MPI_MIN, world);
  MPI_Allreduce(in, sum, 3, MPI_UINT64_T, MPI_SUM, world);
  const std::string from = result.version_path;
  ck.reset();
  MPI_Barrier(world);
  if (R == 0 && !o.no_cleanup) {
    std::error_code ec;
    stdfs::remove_all(co.dir, ec);
    if (ec) std::cerr << kCmd << ": cleaning up " << co.dir << ": " << ec.message() << "\n";
  }
  if (R == 0) {
    const uint64_t saved = rows * row_bytes * static_cast<uint64_t>(o.arrays) + rep_rows * row_bytes;
    if (o.json) {
      std::printf("{\"op\": \"reshard-restore\", \"ranks\": %d, \"checkpoint_bytes\": %llu, \"seconds\": %.6f, "
                  "\"needed_min\": %llu, \"needed_max\": %llu, \"read_min\": %llu, \"read_max\": %llu, "
                  "\"read_total\": %llu, \"wrong_values\": %llu}\n",
                  P, static_cast<unsigned long long>(saved), t, static_cast<unsigned long long>(mn[0]),
                  static_cast<unsigned long long>(mx[0]), static_cast<unsigned long long>(mn[1]),
                  static_cast<unsigned long long>(mx[1]), static_cast<unsigned long long>(sum[1]),
                  static_cast<unsigned long long>(sum[2]));
    } else {
      std::printf("# restore of %s (%llu bytes) at %d ranks: %.3f s, %llu values wrong\n"
                  "# per rank  needed: min %llu max %llu bytes;  read: min %llu max %llu bytes (max %.2fx the "
                  "checkpoint / ranks)\n"
                  "# all ranks read %llu bytes, %.2fx the checkpoint\n",
                  from.c_str(), static_cast<unsigned long long>(saved), P, t, static_cast<unsigned long long>(sum[2]),
                  static_cast<unsigned long long>(mn[0]), static_cast<unsigned long long>(mx[0]),
                  static_cast<unsigned long long>(mn[1]), static_cast<unsigned long long>(mx[1]),
                  static_cast<double>(mx[1]) * P / static_cast<double>(saved), static_cast<unsigned long long>(sum[1]),
                  static_cast<double>(sum[1]) / static_cast<double>(saved));
    }
  }
  return sum[2] == 0 ? 0 : 1;
}

}  // namespace baton::cli
