// baton bench ckpt: Checkpointer::Save and Restore against raw parallel
// writes and reads of the same bytes on the same file system, side by side.
//
// Every rank holds --bytes / ranks bytes in --arrays sharded f32 arrays of
// random data. Each repetition runs, in an order that alternates between
// repetitions: a raw write, a save, a raw read of the raw files, a restore.
// The raw write does what `torch.save` of each rank's part with a durable
// rename does, and what a save does: a new file per rank each time
// (rank-R.tmp, O_EXCL), written from the same buffers in 8 MiB blocks,
// fsynced, renamed over the previous repetition's rank-R (whose blocks are
// freed then, as a save's retention frees an old version's), and the
// directory fsynced. Every phase starts after a barrier and is timed as the
// slowest rank's time. The raw read is what `torch.load` of each rank's
// part does without its unpickling: one plain file per rank read in 8 MiB
// blocks into the same buffers the restore fills (the same allocation on
// both sides: the registered arrays), unverified. By default both sides
// read with the page cache warm (every file read once before the timed
// reads, as after a save on the same node); with --cold the files' pages
// are dropped before each read (posix_fadvise DONTNEED after their fsync:
// clean pages go), so that reads come from the device for both sides
// alike; the output says how the bytes compare with the node's memory.
// --verify-before-write restores as Python's front ends do
// (RestoreOptions::verify_before_write: every chunk verified on every rank
// before any is copied into the arrays); BATON_CKPT_READ=mmap|pread picks how
// the restore reads the shard files (ckpt/hdf5/shard_reader.h), for a side
// by side run of both.
// This disk's throughput swings 2x from minute to minute: only the ratio of
// medians measured in the same run means anything.
#include <dirent.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/median.h"
#include "baton/checkpointer.h"
#include "baton/runtime.h"
#include "ckpt/catalog.h"
#include "ckpt/fs/env.h"
#include "ckpt/run.h"
#include "ckpt/version_removal.h"
#include "cli/bench_options.h"
#include "cli/raw_write.h"
#include "cli/commands.h"

namespace baton::cli {
namespace {

namespace po = boost::program_options;
constexpr const char* kCmd = "baton bench ckpt";
constexpr size_t kBlock = 8u << 20;

struct Options : CkptBenchOptions {
  int group_size = 0;
  std::string transfer = "independent";
  bool no_cleanup = false;
  bool cold = false;
  bool verify_before_write = false;
};

int ParseOptions(const std::vector<std::string>& args, Options* o) {
  po::options_description desc("baton bench ckpt options");
  AddCkptBenchHead(&desc, o, "1G");
  desc.add_options()
      ("group-size", po::value(&o->group_size), "ranks per shard file: 0 = one per node (default), 1 = file per rank");
  AddCkptBenchTail(&desc, o, "repetitions, default 5", "directory on the file system to measure (default $BATON_CKPT_DIR)");
  desc.add_options()
      ("transfer", po::value(&o->transfer), "independent or collective HDF5 transfers, default independent")
      ("no-cleanup", po::bool_switch(&o->no_cleanup), "leave the checkpoints (not the raw files) for inspection")
      ("cold", po::bool_switch(&o->cold), "drop the files' pages from the page cache before each read (default: warm)")
      ("verify-before-write", po::bool_switch(&o->verify_before_write),
       "restore with RestoreOptions::verify_before_write (every rank verifies every chunk before any is written), "
       "as Python's front ends do")
      ("help,h", "print this text");
  po::variables_map vm;
  if (int rc = ParseBenchArgs(kCmd, "srun ... baton bench ckpt [OPTIONS]", desc, args, &vm); rc != 0) return rc;
  if (int rc = CheckCkptBenchOptions(kCmd, o); rc != 0) return rc;
  if (o->group_size < 0) return BadBenchValue(kCmd, "--group-size", std::to_string(o->group_size), "an integer >= 0");
  if (o->transfer != "collective" && o->transfer != "independent")
    return BadBenchValue(kCmd, "--transfer", o->transfer, "collective or independent");
  return 0;
}

// Drops the file's cached pages (they are clean after fsync).
void DropCache(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
}

// Reads the file once, so that its pages are in the page cache.
void WarmCache(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  std::vector<char> buf(kBlock);
  while (read(fd, buf.data(), buf.size()) > 0) {
  }
  close(fd);
}

// Drops (cold) or loads (warm) the pages of every regular file under dir
// (one level of version directories).
void CacheTree(const std::string& dir, bool cold) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    if (e->d_type == DT_DIR)
      CacheTree(path, cold);
    else if (cold)
      DropCache(path);
    else
      WarmCache(path);
  }
  closedir(d);
}

std::string RawRead(const std::string& path, std::vector<std::vector<float>>* arrays) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("open", path);
  for (auto& a : *arrays) {
    char* p = reinterpret_cast<char*>(a.data());
    size_t left = a.size() * sizeof(float);
    while (left > 0) {
      ssize_t n = read(fd, p, std::min(left, kBlock));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        std::string e = n == 0 ? "read " + path + ": unexpected end of file" : Errno("read", path);
        close(fd);
        return e;
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  close(fd);
  return "";
}

// Peak resident memory of this process (VmHWM), in bytes.
uint64_t PeakRss() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) {  // "VmHWM:     1234 kB"
      const size_t at = line.find_first_not_of(" \t", 6);
      uint64_t kib = 0;
      if (at != std::string::npos) std::from_chars(line.data() + at, line.data() + line.size(), kib);
      return kib * 1024;
    }
  return 0;
}

// The slowest rank's seconds in each phase of the last Save or Restore
// (every rank holds the same phase names in the same order).
// Every rank's seconds in each phase, at rank 0 ([rank][phase]): the
// slowest rank's per phase hides which rank waited for which (a wait in an
// agreement is another rank's work).
bool RankPhases(MPI_Comm world, int ranks, const CheckpointStats& st, std::vector<std::vector<double>>* out) {
  std::vector<double> in, all(st.phases.size() * static_cast<size_t>(ranks));
  for (const CheckpointStats::Phase& p : st.phases) in.push_back(p.seconds);
  const int n = static_cast<int>(in.size());
  if (MPI_Gather(in.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, 0, world) != MPI_SUCCESS) return false;
  out->clear();
  for (int r = 0; r < ranks; ++r) out->emplace_back(all.begin() + r * n, all.begin() + (r + 1) * n);
  return true;
}

// Per phase, the median over repetitions.
int Failed(const std::string& mine, int rank) { return BenchFailed(kCmd, mine, rank); }

}  // namespace

int BenchCkptCommand(const std::vector<std::string>& args) {
  Options o;
  if (int rc = ParseOptions(args, &o); rc != 0) return rc < 0 ? 0 : rc;
  std::unique_ptr<Runtime> rt;
  if (Status s = Runtime::Create(nullptr, nullptr, {}, &rt); !s.ok()) {
    std::cerr << kCmd << ": " << s << "\n";
    return 1;
  }
  const MPI_Comm world = rt->world_comm();
  const int P = rt->size(), R = rt->rank();
  const NodeLoad load = CheckRanksPerNode(world, kCmd);

  // Rows of 1 KiB per array and rank; the bytes actually used are reported.
  BenchArrays b = MakeBenchArrays(o, P, R, 1234);
  const uint64_t rows = b.rows, total = b.total;
  std::vector<std::vector<float>>& arrays = b.arrays;

  const std::string bench_dir = o.dir + "/baton-bench-ckpt", raw_dir = bench_dir + "/raw", ckpt_dir = bench_dir + "/ckpt";
  std::string err;
  if (R == 0) {
    for (const std::string& d : {o.dir, bench_dir, raw_dir, ckpt_dir})
      if (mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) err = Errno("mkdir", d);
  }
  double ignored = 0;
  if (!SlowestRank(world, 0, !err.empty(), &ignored)) return Failed(err, R);

  CheckpointOptions co;
  co.dir = ckpt_dir;
  co.group_size = o.group_size;
  co.keep = 2;
  co.transfer = o.transfer == "collective" ? Transfer::kCollective : Transfer::kIndependent;
  std::unique_ptr<Checkpointer> ck;
  Status s = Checkpointer::Create(*rt, co, &ck);
  for (int i = 0; s.ok() && i < o.arrays; ++i)
    s = ck->RegisterSharded("array" + std::to_string(i), arrays[static_cast<size_t>(i)].data(), DType::kF32,
                            {rows * static_cast<uint64_t>(P), kBenchRowFloats}, rows * static_cast<uint64_t>(R), rows);
  if (!SlowestRank(world, 0, !s.ok(), &ignored)) return Failed(s.ok() ? "" : s.ToString(), R);

  const std::string raw_path = raw_dir + "/rank-" + std::to_string(R);
  std::vector<double> t_raw_w, t_save, t_raw_r, t_restore;
  std::vector<std::vector<CheckpointStats::Phase>> p_save, p_restore;
  std::vector<std::vector<std::vector<double>>> restore_rank_phases;  // [repetition][rank][phase], rank 0
  const uint64_t rss_before = PeakRss();
  for (int rep = 0; rep < o.reps; ++rep) {
    // Phase order alternates: raw first on even repetitions, baton first on odd.
    for (int half = 0; half < 2; ++half) {
      const bool raw = (half == 0) == (rep % 2 == 0);
      MPI_Barrier(world);
      double t0 = MPI_Wtime(), t = 0;
      if (raw) {
        err = RawWrite(raw_dir, raw_path, arrays);
      } else {
        s = ck->Save(rep);
        err = s.ok() ? "" : s.ToString();
      }
      if (!SlowestRank(world, MPI_Wtime() - t0, !err.empty(), &t)) return Failed(err, R);
      (raw ? t_raw_w : t_save).push_back(t);
      if (!raw && !SlowestPhases(world, ck->last_stats(), &p_save.emplace_back())) return Failed("MPI_Allreduce", R);
    }
    // Cold or warm reads, the same on both sides.
    if (o.cold)
      DropCache(raw_path);
    else
      WarmCache(raw_path);
    if (rt->local_rank() == 0) CacheTree(ckpt_dir, o.cold);
    for (int half = 0; half < 2; ++half) {
      const bool raw = (half == 0) == (rep % 2 == 0);
      MPI_Barrier(world);
      double t0 = MPI_Wtime(), t = 0;
      if (raw) {
        err = RawRead(raw_path, &arrays);
      } else {
        RestoreOptions ro;
        ro.verify_before_write = o.verify_before_write;
        RestoreResult result;
        s = ck->Restore(ro, &result);
        err = s.ok() ? (result.step == rep ? "" : "restore gave another step than the one just saved") : s.ToString();
      }
      if (!SlowestRank(world, MPI_Wtime() - t0, !err.empty(), &t)) return Failed(err, R);
      (raw ? t_raw_r : t_restore).push_back(t);
      if (!raw && !SlowestPhases(world, ck->last_stats(), &p_restore.emplace_back()))
        return Failed("MPI_Allreduce", R);
      if (!raw && !RankPhases(world, P, ck->last_stats(), &restore_rank_phases.emplace_back()))
        return Failed("MPI_Gather", R);
    }
  }
  // What the last restore read per rank, beside what it needed.
  uint64_t read_in[2] = {ck->last_stats().bytes, ck->last_stats().bytes_read}, read_max[2] = {0, 0};
  MPI_Allreduce(read_in, read_max, 2, MPI_UINT64_T, MPI_MAX, world);
  // The node's memory, to say whether the files could all be cached.
  const uint64_t mem = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  // What saving and restoring added to the peak memory, over all ranks.
  uint64_t extra = PeakRss() - rss_before, max_extra = 0;
  MPI_Allreduce(&extra, &max_extra, 1, MPI_UINT64_T, MPI_MAX, world);

  unlink(raw_path.c_str());
  ck.reset();
  MPI_Barrier(world);
  if (R == 0) {
    rmdir(raw_dir.c_str());
    if (!o.no_cleanup) {
      ckpt::fs::Env* env = ckpt::fs::Env::Default();
      std::vector<ckpt::VersionInfo> versions;
      Status ls = ckpt::ListVersions(env, ckpt_dir, co.max_restore_failures, &versions);
      for (const ckpt::VersionInfo& v : versions)
        if (Status rm = ckpt::RemoveVersion(env, v); !rm.ok()) ls = rm;
      if (!ls.ok()) std::cerr << kCmd << ": cleaning up: " << ls << "\n";
      // The directory's run file and writer lock (ckpt/run.h) go with it.
      unlink((ckpt_dir + "/" + ckpt::kRunFileName).c_str());
      unlink((ckpt_dir + "/" + ckpt::kWriterLockName).c_str());
      rmdir(ckpt_dir.c_str());
      rmdir(bench_dir.c_str());
    } else if (!o.json) {
      std::printf("# checkpoints left in %s\n", ckpt_dir.c_str());
    }
  }

  if (R == 0) {
    const double gb = static_cast<double>(total) / 1e9;
    const char* read_env = std::getenv("BATON_CKPT_READ");
    const std::string read_mode = read_env != nullptr && *read_env != '\0' ? read_env : "pread";
    struct Op {
      const char* name;
      double s, raw;
      std::vector<CheckpointStats::Phase> phases;
      const std::vector<double>& reps;  // each repetition's seconds, in order
      const std::vector<double>& raw_reps;
    } ops[] = {{"save", Median(t_save), Median(t_raw_w), MedianPhases(p_save), t_save, t_raw_w},
               {"restore", Median(t_restore), Median(t_raw_r), MedianPhases(p_restore), t_restore, t_raw_r}};
    const std::string group = o.group_size == 0 ? "node" : std::to_string(o.group_size);
    if (!o.json)
      std::printf("# %d ranks, %s per shard file, %d arrays, %llu bytes in all, %d repetitions, %s transfers, %s%s, "
                  "shard reads %s\n"
                  "# %-8s %10s %10s %10s %8s\n",
                  P, group.c_str(), o.arrays, static_cast<unsigned long long>(total), o.reps, o.transfer.c_str(),
                  o.dir.c_str(), o.verify_before_write ? ", restore verify_before_write" : "", read_mode.c_str(),
                  "op", "seconds", "GB/s", "raw GB/s", "ratio");
    if (!o.json && load.oversubscribed())
      std::printf("# OVERSUBSCRIBED: up to %d ranks on a node of %d core(s); not a measure of the checkpoint\n",
                  load.ranks_per_node, load.cores);
    for (const Op& op : ops) {
      const double gbps = gb / op.s, raw_gbps = gb / op.raw;
      if (o.json) {
        nlohmann::json j = {{"op", op.name},       {"bytes", total},           {"ranks", P},
                            {"group_size", o.group_size}, {"seconds", op.s},   {"GBps", gbps},
                            {"raw_GBps", raw_gbps}, {"ratio", gbps / raw_gbps}, {"reps", o.reps},
                            {"transfer", o.transfer}, {"extra_peak_rss_bytes", max_extra},
                            {"node_memory_bytes", mem}, {"cache_dropped", o.cold},
                            {"verify_before_write", o.verify_before_write}, {"shard_reads", read_mode},
                            {"ranks_per_node", load.ranks_per_node}, {"node_cores", load.cores},
                            {"oversubscribed", load.oversubscribed()}};
        nlohmann::json phases = nlohmann::json::object();
        for (const CheckpointStats::Phase& p : op.phases) phases[p.name] = p.seconds;
        j["phases"] = phases;
        j["rep_seconds"] = op.reps;
        j["raw_rep_seconds"] = op.raw_reps;
        if (std::string(op.name) == "restore") {
          // [repetition][rank]: {phase: seconds}, every rank's own.
          nlohmann::json reps = nlohmann::json::array();
          for (const auto& rep : restore_rank_phases) {
            nlohmann::json ranks = nlohmann::json::array();
            for (const std::vector<double>& secs : rep) {
              nlohmann::json one = nlohmann::json::object();
              for (size_t i = 0; i < secs.size() && i < op.phases.size(); ++i) one[op.phases[i].name] = secs[i];
              ranks.push_back(one);
            }
            reps.push_back(ranks);
          }
          j["rank_phases"] = reps;
        }
        std::cout << j.dump() << "\n";
      } else {
        std::printf("  %-8s %10.3f %10.3f %10.3f %8.3f\n", op.name, op.s, gbps, raw_gbps, gbps / raw_gbps);
      }
    }
    if (!o.json) {
      // Per phase: the slowest rank's seconds, median over repetitions
      // (the phases' medians need not add up to the call's).
      for (const Op& op : ops) {
        std::printf("# %s phases (slowest rank, median s):", op.name);
        for (const CheckpointStats::Phase& p : op.phases) std::printf(" %s %.3f", p.name.c_str(), p.seconds);
        std::printf("\n");
      }
    }
    if (!o.json)
      std::printf("# reads %s; the bytes are %.2fx this node's %.1f GiB of memory (raw and a checkpoint: %.2fx)\n",
                  o.cold ? "after posix_fadvise(DONTNEED) of every file (--cold)"
                         : "with the page cache warm (every file read once before; --cold drops it)",
                  static_cast<double>(total) / static_cast<double>(mem), static_cast<double>(mem) / (1 << 30),
                  2.0 * static_cast<double>(total) / static_cast<double>(mem));
    if (!o.json) {
      // Each repetition's pair: a median hides how often the goal is missed.
      std::printf("# restore beside the raw read, each repetition (s):");
      for (size_t i = 0; i < t_restore.size() && i < t_raw_r.size(); ++i)
        std::printf(" %.3f/%.3f (%.2f)", t_restore[i], t_raw_r[i], t_raw_r[i] / t_restore[i]);
      std::printf("\n");
    }
    if (!o.json)
      std::printf("# restore per rank (max over ranks): %llu bytes needed, %llu read from shard files\n",
                  static_cast<unsigned long long>(read_max[0]), static_cast<unsigned long long>(read_max[1]));
    if (!o.json)
      std::printf("# peak memory added by save and restore (max over ranks): %.1f MiB\n",
                  static_cast<double>(max_extra) / (1 << 20));
  }
  return 0;
}

}  // namespace baton::cli
