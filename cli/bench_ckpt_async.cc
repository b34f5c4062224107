// baton bench ckpt --async: Checkpointer::SaveAsync side by side with what
// it stands for.
//
// 1. Blocking: the time SaveAsync blocks (the slowest rank's) beside a
//    plain memcpy of the same bytes into a buffer already faulted in, in
//    alternating order; each SaveAsync is then completed with Wait()
//    (untimed). The first SaveAsync, which allocates and faults in the
//    staging copy, is reported apart (first_blocking_seconds).
// 2. Overlap: a training-like loop of --steps steps of fixed CPU work (a
//    dependent floating-point loop over a 64 KiB array in cache, the same
//    number of iterations every step) with SaveAsync every --every steps,
//    beside the same loop with no saves, in alternating order. The work per
//    step is calibrated so that --every steps take --overlap (default 2)
//    times one save's background write, measured first: the compute
//    outlasts the write, as the issue asks. On a machine with fewer free
//    cores than ranks + writers, the writer takes CPU from the compute;
//    the rate ratio shows it.
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
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
constexpr const char* kCmd = "baton bench ckpt --async";

struct Options : CkptBenchOptions {
  int every = 10, steps = 60;
  double overlap = 2;
};

int ParseOptions(const std::vector<std::string>& args, Options* o) {
  po::options_description desc("baton bench ckpt --async options");
  AddCkptBenchHead(&desc, o, "256M");
  desc.add_options()
      ("every", po::value(&o->every), "loop: SaveAsync every this many steps, default 10")
      ("steps", po::value(&o->steps), "loop: steps per run, default 60")
      ("overlap", po::value(&o->overlap), "loop: compute of --every steps over one background write, default 2");
  AddCkptBenchTail(&desc, o, "repetitions of each measurement, default 5",
                   "directory on the file system to measure (default $BATON_CKPT_DIR)");
  desc.add_options()("help,h", "print this text");
  po::variables_map vm;
  if (int rc = ParseBenchArgs(kCmd, "srun ... baton bench ckpt --async [OPTIONS]", desc, args, &vm); rc != 0)
    return rc;
  if (int rc = CheckCkptBenchOptions(kCmd, o); rc != 0) return rc;
  if (o->every < 1) return BadBenchValue(kCmd, "--every", std::to_string(o->every), "an integer >= 1");
  if (o->steps < o->every) return BadBenchValue(kCmd, "--steps", std::to_string(o->steps), "an integer >= --every");
  if (!(o->overlap > 0)) return BadBenchValue(kCmd, "--overlap", std::to_string(o->overlap), "a number > 0");
  return 0;
}

bool Slowest(MPI_Comm world, double seconds, bool failed, double* slowest) {
  return SlowestRank(world, seconds, failed, slowest);
}
int Failed(const Status& s, int rank) { return BenchFailed(kCmd, s, rank); }

// Fixed CPU work: `iters` dependent multiply-adds over a 64 KiB array
// (in L2), so that neither the compiler nor the memory system shortens it.
double Compute(std::vector<double>* v, long iters) {
  double acc = 0;
  const size_t n = v->size();
  for (long i = 0; i < iters; ++i) {
    double& x = (*v)[static_cast<size_t>(i) % n];
    x = x * 0.999999 + 1e-7;
    acc += x;
  }
  return acc;
}

}  // namespace

int BenchCkptAsyncCommand(const std::vector<std::string>& args) {
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
  BenchArrays b = MakeBenchArrays(o, P, R, 4321);
  const uint64_t rows = b.rows, total = b.total;
  const uint64_t mine = total / static_cast<uint64_t>(P);
  std::vector<std::vector<float>>& arrays = b.arrays;
  // The memcpy's destination, faulted in once (as the staging copy is after
  // the first save).
  std::vector<char> copy(mine, 1);

  const std::string bench_dir = o.dir + "/baton-bench-ckpt-async";
  Status s;
  if (R == 0) {
    for (const std::string& d : {o.dir, bench_dir})
      if (mkdir(d.c_str(), 0700) != 0 && errno != EEXIST)
        s = Status::IOError("bench", "mkdir " + d + ": " + std::strerror(errno));
  }
  double t = 0;
  if (!Slowest(world, 0, !s.ok(), &t)) return Failed(s, R);
  CheckpointOptions co;
  co.dir = bench_dir;
  co.keep = 1;
  std::unique_ptr<Checkpointer> ck;
  s = Checkpointer::Create(*rt, co, &ck);
  for (int i = 0; s.ok() && i < o.arrays; ++i)
    s = ck->RegisterSharded("array" + std::to_string(i), arrays[static_cast<size_t>(i)].data(), DType::kF32,
                            {rows * static_cast<uint64_t>(P), kBenchRowFloats}, rows * static_cast<uint64_t>(R), rows);
  if (!Slowest(world, 0, !s.ok(), &t)) return Failed(s, R);

  int64_t step = 0;
  // 1. Blocking time beside memcpy; the first save apart.
  double first_blocking = 0, write_seconds = 0;
  {
    MPI_Barrier(world);
    double t0 = MPI_Wtime();
    s = ck->SaveAsync(step++);
    if (!Slowest(world, MPI_Wtime() - t0, !s.ok(), &first_blocking)) return Failed(s, R);
    t0 = MPI_Wtime();
    s = ck->Wait();
    if (!Slowest(world, MPI_Wtime() - t0, !s.ok(), &t)) return Failed(s, R);
  }
  std::vector<double> t_block, t_memcpy, t_write, t_raw;
  std::vector<std::vector<CheckpointStats::Phase>> p_alone;
  for (int rep = 0; rep < o.reps; ++rep) {
    for (int half = 0; half < 2; ++half) {
      const bool plain = (half == 0) == (rep % 2 == 0);
      MPI_Barrier(world);
      const double t0 = MPI_Wtime();
      if (plain) {
        size_t at = 0;
        for (const auto& a : arrays) {
          std::memcpy(copy.data() + at, a.data(), a.size() * sizeof(float));
          at += a.size() * sizeof(float);
        }
      } else {
        s = ck->SaveAsync(step++);
      }
      if (!Slowest(world, MPI_Wtime() - t0, !s.ok(), &t)) return Failed(s, R);
      (plain ? t_memcpy : t_block).push_back(t);
      if (!plain && !SlowestPhases(world, ck->last_stats(), &p_alone.emplace_back())) return Failed(s, R);
      if (!plain) {
        // Until this rank's write ended (the commit is not part of it).
        const double w0 = MPI_Wtime();
        while (ck->async_status().state == AsyncSaveStatus::State::kWriting) usleep(200);
        const double written = MPI_Wtime() - w0 + t;
        s = ck->Wait();
        if (!Slowest(world, written, !s.ok(), &t)) return Failed(s, R);
        t_write.push_back(t);
      }
    }
    // The disk's own figure in the same run: the same bytes written plainly
    // and fsynced (dd conv=fsync, torch.save + fsync), each rank its file.
    MPI_Barrier(world);
    const double r0 = MPI_Wtime();
    const std::string raw_path = bench_dir + "/raw-" + std::to_string(R);
    const std::string err = RawWrite(bench_dir, raw_path, arrays);
    if (err.empty()) unlink(raw_path.c_str());
    if (!err.empty()) s = Status::IOError("bench", err);
    if (!Slowest(world, MPI_Wtime() - r0, !s.ok(), &t)) return Failed(s, R);
    t_raw.push_back(t);
  }
  write_seconds = Median(t_write);

  // 2. The loop, calibrated: iterations per step so that --every steps of
  // compute take --overlap times one background write.
  std::vector<double> work(8192, 1.0);
  volatile double sink = 0;
  long iters = 1 << 20;
  {
    const double t0 = MPI_Wtime();
    sink = sink + Compute(&work, iters);
    const double per_iter = (MPI_Wtime() - t0) / static_cast<double>(iters);
    double want = o.overlap * write_seconds / o.every / per_iter, agreed = 0;
    MPI_Allreduce(&want, &agreed, 1, MPI_DOUBLE, MPI_MAX, world);
    iters = std::max<long>(1000, static_cast<long>(agreed));
  }
  std::vector<double> rate_ckpt, rate_none, in_saves;
  // Per loop, summed over its SaveAsync calls: this rank's phases, then the
  // slowest rank's per phase.
  std::vector<std::vector<CheckpointStats::Phase>> p_loop;
  for (int rep = 0; rep < o.reps; ++rep) {
    for (int half = 0; half < 2; ++half) {
      const bool saves = (half == 0) == (rep % 2 == 0);
      MPI_Barrier(world);
      const double t0 = MPI_Wtime();
      double blocked = 0;  // inside SaveAsync: the copy, the previous save's commit, any wait for its write
      CheckpointStats in_calls;  // this loop's SaveAsync phases, summed
      for (int i = 1; i <= o.steps && s.ok(); ++i) {
        sink = sink + Compute(&work, iters);
        // A step's collective, as a training step's gradient all-reduce.
        double g = sink, sum = 0;
        MPI_Allreduce(&g, &sum, 1, MPI_DOUBLE, MPI_SUM, world);
        if (saves && i % o.every == 0) {
          const double b0 = MPI_Wtime();
          s = ck->SaveAsync(step++);
          blocked += MPI_Wtime() - b0;
          if (s.ok()) {
            const auto& ph = ck->last_stats().phases;
            if (in_calls.phases.empty()) {
              in_calls.phases = ph;
            } else {
              for (size_t k = 0; k < ph.size() && k < in_calls.phases.size(); ++k)
                in_calls.phases[k].seconds += ph[k].seconds;
            }
          }
        }
      }
      const double loop = MPI_Wtime() - t0;
      if (!Slowest(world, loop, !s.ok(), &t)) return Failed(s, R);
      (saves ? rate_ckpt : rate_none).push_back(o.steps / t);
      if (saves) {
        if (!Slowest(world, blocked, false, &t)) return Failed(s, R);
        in_saves.push_back(t);
        if (!SlowestPhases(world, in_calls, &p_loop.emplace_back())) return Failed(s, R);
      }
      s = ck->Wait();  // the last save's commit: after the timed loop, as at a run's end
      if (!Slowest(world, 0, !s.ok(), &t)) return Failed(s, R);
    }
  }

  // 3. The disk's sustained figure in the same run: as many plain durable
  // writes back to back as the loop has saves, each file removed once the
  // next is written (the loop's keep=1). One write after an idle disk (the
  // raw figure above) can run at what the host's cache takes; the loop asks
  // for a save's bytes every --every steps, and this is what the disk keeps
  // up with then.
  const int saves_per_loop = o.steps / o.every;  // >= 1: ParseOptions refuses --steps below --every
  double sustained = 0;
  {
    MPI_Barrier(world);
    const double r0 = MPI_Wtime();
    std::string last;
    for (int i = 0; i < saves_per_loop && s.ok(); ++i) {
      const std::string raw_path = bench_dir + "/sustained-" + std::to_string(R) + "-" + std::to_string(i % 2);
      const std::string err = RawWrite(bench_dir, raw_path, arrays);
      if (!err.empty()) s = Status::IOError("bench", err);
      if (!last.empty()) unlink(last.c_str());
      last = raw_path;
    }
    if (!last.empty()) unlink(last.c_str());
    if (!Slowest(world, MPI_Wtime() - r0, !s.ok(), &t)) return Failed(s, R);
    sustained = t / saves_per_loop;
  }

  ck.reset();
  MPI_Barrier(world);
  if (R == 0) {
    ckpt::fs::Env* env = ckpt::fs::Env::Default();
    std::vector<ckpt::VersionInfo> versions;
    Status ls = ckpt::ListVersions(env, bench_dir, co.max_restore_failures, &versions);
    for (const ckpt::VersionInfo& v : versions)
      if (Status rm = ckpt::RemoveVersion(env, v); !rm.ok()) ls = rm;
    if (!ls.ok()) std::cerr << kCmd << ": cleaning up: " << ls << "\n";
    unlink((bench_dir + "/" + ckpt::kRunFileName).c_str());
    unlink((bench_dir + "/" + ckpt::kWriterLockName).c_str());
    rmdir(bench_dir.c_str());

    const double blocking = Median(t_block), memcpy_s = Median(t_memcpy), raw_write = Median(t_raw);
    const double with = Median(rate_ckpt), without = Median(rate_none);
    // The loop's compute between two saves is --overlap background writes;
    // a SaveAsync that only copied, at memcpy's speed, leaves the loop this
    // share of its rate: the most any staging copy allows on this machine.
    const double bound = o.overlap * write_seconds / (o.overlap * write_seconds + memcpy_s);
    // The same loop against the disk's sustained write S: a save's write
    // starts when its call has staged the state (b), and the next call waits
    // for it (wait_write) before it stages; between them the loop computes C
    // (--every steps). So a cycle takes at least b + max(C, S), and the loop
    // keeps at most C / (b + max(C, S)): the memcpy bound above where the
    // disk keeps up (S <= C), less where it does not.
    const double compute_per_save = o.every / without;
    const double disk_bound = compute_per_save / (blocking + std::max(compute_per_save, sustained));
    // The phases as JSON, and the call's part apart from the writer's own
    // (writer_*: its thread, the disk's write-back in writer_sync).
    auto as_json = [](const std::vector<CheckpointStats::Phase>& ph, double scale) {
      nlohmann::json j = nlohmann::json::object();
      for (const CheckpointStats::Phase& x : ph) j[x.name] = x.seconds * scale;
      return j;
    };
    const std::vector<CheckpointStats::Phase> alone = MedianPhases(p_alone), loop = MedianPhases(p_loop);
    if (o.json) {
      nlohmann::json a = {{"op", "save_async"},          {"bytes", total},
                          {"ranks", P},                  {"reps", o.reps},
                          {"blocking_seconds", blocking}, {"memcpy_seconds", memcpy_s},
                          {"ratio", blocking / memcpy_s}, {"first_blocking_seconds", first_blocking},
                          {"write_seconds", write_seconds}, {"raw_write_seconds", raw_write},
                          {"rep_raw_write_seconds", t_raw}, {"phases", as_json(alone, 1)},
                          {"rep_seconds", t_block}, {"memcpy_rep_seconds", t_memcpy},
                          {"ranks_per_node", load.ranks_per_node}, {"node_cores", load.cores},
                          {"oversubscribed", load.oversubscribed()}};
      nlohmann::json l = {{"op", "save_async_loop"}, {"bytes", total},
                          {"ranks", P},              {"reps", o.reps},
                          {"steps", o.steps},        {"every", o.every},
                          {"iters_per_step", iters}, {"steps_per_s", with},
                          {"steps_per_s_no_ckpt", without}, {"ratio", with / without},
                          {"ratio_bound_at_memcpy", bound},
                          {"seconds_in_save_async", Median(in_saves)},
                          {"saves_per_loop", saves_per_loop},
                          {"blocking_per_save_seconds", Median(in_saves) / saves_per_loop},
                          {"blocking_per_save_over_memcpy", Median(in_saves) / saves_per_loop / memcpy_s},
                          {"phases_per_save", as_json(loop, 1.0 / saves_per_loop)},
                          {"rep_steps_per_s", rate_ckpt}, {"rep_steps_per_s_no_ckpt", rate_none},
                          {"rep_seconds_in_save_async", in_saves},
                          {"write_seconds", write_seconds},
                          {"sustained_raw_write_seconds", sustained},
                          {"compute_per_save_seconds", compute_per_save},
                          {"ratio_bound_at_sustained_disk", disk_bound},
                          {"ranks_per_node", load.ranks_per_node}, {"node_cores", load.cores},
                          {"oversubscribed", load.oversubscribed()}};
      std::cout << a.dump() << "\n" << l.dump() << "\n";
    } else {
      std::printf("# %d ranks, %llu bytes in all (%llu per rank), %d repetitions, %s\n", P,
                  static_cast<unsigned long long>(total), static_cast<unsigned long long>(mine), o.reps,
                  o.dir.c_str());
      std::printf("  SaveAsync blocks %.4f s, memcpy of the same bytes %.4f s: ratio %.2f (goal <= 2); "
                  "first SaveAsync %.4f s; background write %.3f s\n",
                  blocking, memcpy_s, blocking / memcpy_s, first_blocking, write_seconds);
      std::printf("  raw write of the same bytes (write + fsync, as dd conv=fsync) %.3f s: the background write "
                  "is %.2fx it; a SaveAsync copying at memcpy's speed allows a loop ratio of at most %.3f here "
                  "(%.1f writes of compute per save)\n",
                  raw_write, write_seconds / raw_write, bound, o.overlap);
      std::printf("  loop of %d steps, SaveAsync every %d: %.2f steps/s, no saves: %.2f steps/s: ratio %.3f "
                  "(goal >= 0.95); %.3f s of each loop inside SaveAsync (%.4f s a call, %.2f memcpys)\n",
                  o.steps, o.every, with, without, with / without, Median(in_saves), Median(in_saves) / saves_per_loop,
                  Median(in_saves) / saves_per_loop / memcpy_s);
      std::printf("  the disk sustained: %d raw writes back to back took %.3f s each; the loop's %.3f s of compute "
                  "a save (plus %.4f s blocked) allow a loop ratio of at most %.3f at that disk%s\n",
                  saves_per_loop, sustained, compute_per_save, blocking, disk_bound,
                  disk_bound < 0.95 ? " (the disk is the limit: below 0.95)" : "");
      auto print = [](const char* what, const std::vector<CheckpointStats::Phase>& ph, double scale) {
        std::printf("# %s (slowest rank, median s):", what);
        for (const CheckpointStats::Phase& x : ph) std::printf(" %s %.4f", x.name.c_str(), x.seconds * scale);
        std::printf("\n");
      };
      print("SaveAsync alone, phases", alone, 1);
      print("SaveAsync in the loop, phases a call", loop, 1.0 / saves_per_loop);
      std::printf("# writer_* run on the writer's thread, not inside the call; writer_sync is the disk's write-back\n");
      if (load.oversubscribed())
        std::printf("# OVERSUBSCRIBED: up to %d ranks on a node of %d core(s), and a writer thread each\n",
                    load.ranks_per_node, load.cores);
    }
  }
  return 0;
}

}  // namespace baton::cli
