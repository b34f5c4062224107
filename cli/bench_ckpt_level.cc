// baton bench ckpt --level 2|3: Restore from node-local copies (level 2)
// beside Restore from the shared directory (level 3) of the same version,
// side by side in one run.
//
// Every rank holds --bytes / ranks bytes in --arrays sharded f32 arrays of
// random data; one Save writes a version to both levels (shared_every 1).
// Each repetition then restores it from level 2 and from level 3
// (RestoreOptions::from_level), in an order that alternates between
// repetitions, after a barrier, timed as the slowest rank; before each
// restore the pages of both levels' files are dropped from the page cache
// (posix_fadvise DONTNEED: clean after their fsync), so that both read from
// their devices. --level names the level whose row is printed first; both
// are always measured: only the ratio measured in the same run means
// anything on a disk whose speed swings from minute to minute.
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "base/median.h"
#include "baton/checkpointer.h"
#include "baton/runtime.h"
#include "cli/bench_options.h"
#include "cli/commands.h"

namespace baton::cli {
namespace {

namespace po = boost::program_options;
namespace stdfs = std::filesystem;
constexpr const char* kCmd = "baton bench ckpt --level";

struct Options : CkptBenchOptions {
  int level = 2;
  std::string local_dir;
};

int ParseOptions(const std::vector<std::string>& args, Options* o) {
  po::options_description desc("baton bench ckpt --level options");
  desc.add_options()("level", po::value(&o->level), "2 or 3: the level printed first (both are measured)");
  AddCkptBenchHead(&desc, o, "256M");
  AddCkptBenchTail(&desc, o, "repetitions, default 5", "the shared directory, level 3 (default $BATON_CKPT_DIR)");
  desc.add_options()
      ("local-dir", po::value(&o->local_dir), "the node-local directory, level 2 (default $BATON_LOCAL_DIR)")
      ("help,h", "print this text");
  po::variables_map vm;
  if (int rc = ParseBenchArgs(kCmd, "srun ... baton bench ckpt --level 2|3 [OPTIONS]", desc, args, &vm); rc != 0)
    return rc;
  if (o->level != 2 && o->level != 3) return BadBenchValue(kCmd, "--level", std::to_string(o->level), "2 or 3");
  if (int rc = CheckCkptBenchOptions(kCmd, o); rc != 0) return rc;
  if (o->local_dir.empty()) {
    const char* e = std::getenv("BATON_LOCAL_DIR");
    if (e != nullptr) o->local_dir = e;
  }
  if (o->local_dir.empty()) {
    std::cerr << kCmd << ": no node-local directory: give --local-dir or set BATON_LOCAL_DIR\n";
    return 2;
  }
  return 0;
}

bool Slowest(MPI_Comm world, double seconds, bool failed, double* slowest) {
  return SlowestRank(world, seconds, failed, slowest);
}
int Failed(const Status& s, int rank) { return BenchFailed(kCmd, s, rank); }

// Drops the cached pages of every regular file under dir.
void DropCache(const std::string& dir) {
  std::error_code ec;
  for (stdfs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const int fd = open(it->path().c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) continue;
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
}

}  // namespace

int BenchCkptLevelCommand(const std::vector<std::string>& args) {
  Options o;
  if (int rc = ParseOptions(args, &o); rc != 0) return rc < 0 ? 0 : rc;
  std::unique_ptr<Runtime> rt;
  if (Status s = Runtime::Create(nullptr, nullptr, {}, &rt); !s.ok()) {
    std::cerr << kCmd << ": " << s << "\n";
    return 1;
  }
  const MPI_Comm world = rt->world_comm();
  const int P = rt->size(), R = rt->rank();
  BenchArrays b = MakeBenchArrays(o, P, R, 1234);
  const uint64_t rows = b.rows, total = b.total;
  std::vector<std::vector<float>>& arrays = b.arrays;
  const std::string bench_dir = o.dir + "/baton-bench-ckpt-level";
  CheckpointOptions co;
  co.dir = bench_dir;
  co.local_dir = o.local_dir;
  co.keep = 1;
  co.local_keep = 1;
  std::unique_ptr<Checkpointer> ck;
  Status s = Checkpointer::Create(*rt, co, &ck);
  for (int i = 0; s.ok() && i < o.arrays; ++i)
    s = ck->RegisterSharded("array" + std::to_string(i), arrays[static_cast<size_t>(i)].data(), DType::kF32,
                            {rows * static_cast<uint64_t>(P), kBenchRowFloats}, rows * static_cast<uint64_t>(R), rows);
  if (s.ok()) s = ck->Save(1);
  if (s.ok() && ck->last_stats().level != 2) {
    s = Status::Unavailable("bench", "the save did not reach level 2 (see the warnings above)");
  }
  double t = 0;
  if (!Slowest(world, 0, !s.ok(), &t)) return Failed(s, R);
  const std::string local_root = o.local_dir + "/" + ck->run_id();

  // Saves: the whole Save (both levels) and its partner exchange on the
  // caller's thread (0 with one node: no partner).
  std::vector<double> t_save, t_exchange;
  uint64_t partner_bytes = 0;
  for (int rep = 0; rep < o.reps; ++rep) {
    MPI_Barrier(world);
    const double t0 = MPI_Wtime();
    s = ck->Save(2 + rep);
    const double took = MPI_Wtime() - t0;
    double exchange = 0;
    for (const CheckpointStats::Phase& ph : ck->last_stats().phases)
      if (ph.name == "exchange") exchange = ph.seconds;
    if (!Slowest(world, took, !s.ok(), &t)) return Failed(s, R);
    t_save.push_back(t);
    if (!Slowest(world, exchange, false, &t)) return Failed(s, R);
    t_exchange.push_back(t);
    uint64_t mine = ck->last_stats().bytes_partner;
    MPI_Allreduce(&mine, &partner_bytes, 1, MPI_UINT64_T, MPI_MAX, world);
  }

  std::vector<double> t2, t3;
  uint64_t bytes2 = 0, bytes3 = 0;
  for (int rep = 0; rep < o.reps; ++rep) {
    for (int half = 0; half < 2; ++half) {
      const int level = (half == 0) == (rep % 2 == 0) ? 2 : 3;
      DropCache(local_root);
      DropCache(bench_dir);
      RestoreOptions ro;
      ro.from_level = level == 3 ? 3 : 0;
      RestoreResult rr;
      MPI_Barrier(world);
      const double t0 = MPI_Wtime();
      s = ck->Restore(ro, &rr);
      const double took = MPI_Wtime() - t0;
      if (s.ok() && rr.level != level) {
        s = Status::Internal("bench", "restored from level " + std::to_string(rr.level) + ", not " +
                                          std::to_string(level));
      }
      if (!Slowest(world, took, !s.ok(), &t)) return Failed(s, R);
      (level == 2 ? t2 : t3).push_back(t);
      (level == 2 ? bytes2 : bytes3) = level == 2 ? ck->last_stats().total_bytes_level2
                                                  : ck->last_stats().total_bytes_level3;
    }
  }
  const std::string run_id = ck->run_id();
  ck.reset();
  MPI_Barrier(world);
  // Each node's first rank removes its level-2 copies, rank 0 the shared ones.
  std::error_code ec;
  if (rt->local_rank() == 0) stdfs::remove_all(local_root, ec);
  if (R == 0) stdfs::remove_all(bench_dir, ec);
  if (R == 0) {
    const double s2 = Median(t2), s3 = Median(t3);
    nlohmann::json r2 = {{"op", "restore"}, {"level", 2},         {"bytes", bytes2}, {"ranks", P},
                         {"reps", o.reps},  {"seconds", s2},      {"gb_per_s", total / s2 / 1e9}};
    nlohmann::json r3 = {{"op", "restore"}, {"level", 3},         {"bytes", bytes3}, {"ranks", P},
                         {"reps", o.reps},  {"seconds", s3},      {"gb_per_s", total / s3 / 1e9}};
    r2["level3_over_level2"] = s3 / s2;
    r3["level3_over_level2"] = s3 / s2;
    nlohmann::json sv = {{"op", "save_level2"},         {"bytes", total},
                         {"ranks", P},                  {"reps", o.reps},
                         {"seconds", Median(t_save)},   {"exchange_seconds", Median(t_exchange)},
                         {"partner_bytes_per_rank", partner_bytes}};
    if (o.json) {
      std::cout << (o.level == 2 ? r2 : r3).dump() << "\n" << (o.level == 2 ? r3 : r2).dump() << "\n"
                << sv.dump() << "\n";
    } else {
      std::printf("# %d ranks, %llu bytes in all, %d repetitions; level 2: %s, level 3: %s\n", P,
                  static_cast<unsigned long long>(total), o.reps, o.local_dir.c_str(), o.dir.c_str());
      for (int level : {o.level, 5 - o.level}) {
        const double sec = level == 2 ? s2 : s3;
        std::printf("  restore from level %d: %.4f s (%.2f GB/s)\n", level, sec, total / sec / 1e9);
      }
      std::printf("  level 3 / level 2: %.2f (goal > 1: level 2 faster)\n", s3 / s2);
      std::printf("  Save to both levels: %.4f s, of which the partner exchange (caller's thread) %.4f s for "
                  "%llu bytes per rank\n",
                  Median(t_save), Median(t_exchange), static_cast<unsigned long long>(partner_bytes));
    }
  }
  return 0;
}

}  // namespace baton::cli
