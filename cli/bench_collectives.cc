// baton bench collectives: baton's collectives against the raw MPI call,
// in the manner of nccl-tests. For every size, iteration i runs baton's
// collective once per algorithm asked (in an order rotated per iteration)
// and then the matching MPI collective on the same buffers, each after an
// MPI_Barrier and each timed as the slowest rank's time (an MPI_Allreduce
// MAX); the medians are reported. Interleaving them in one loop keeps drift
// (other jobs, frequency, caches) out of the comparison.
// --tune measures the three all-reduce algorithms and saves, per size, the
// fastest for this job shape; algorithm auto reads that table.
// Every collective the benchmark makes beside baton's own (the raw call,
// the barriers, the agreements) is under BATON_COLLECTIVE_TIMEOUT too: a
// rank that stops makes the others exit 75 instead of waiting for ever.
#include <mpi.h>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <map>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "base/median.h"
#include "baton/communicator.h"
#include "baton/runtime.h"
#include "baton_config.h"
#include "cli/bench_options.h"
#include "cli/byte_size.h"
#include "cli/collective_case.h"
#include "cli/commands.h"
#include "mpi_runtime/deadline.h"
#include "mpi_runtime/mpi/mpi_communicator.h"
#include "mpi_runtime/mpi/mpi_types.h"
#include "mpi_runtime/mpi/reduce_kernels.h"
#include "mpi_runtime/mpi/tune_table.h"
#include "mpi_runtime/mpi/watchdog.h"
#if BATON_HAVE_NCCL
#include "cli/nccl_bench.h"
#endif

namespace baton::cli {
namespace {

namespace po = boost::program_options;
constexpr const char* kCmd = "baton bench collectives";


struct Options {
  size_t min_bytes = 8, max_bytes = 64u << 20;
  long step_factor = 2, iters = 20, warmup = 5, check = 1;
  Backend backend = Backend::kMpi;
  std::vector<Algorithm> algos;
  ReduceOp op = ReduceOp::kSum;
  DType dtype = DType::kF32;
  Collective collective = Collective::kAllReduce;
  bool json = false, tune = false;
  std::string tune_path;
};

int BadValue(const std::string& option, const std::string& value, const std::string& expected) {
  return BadBenchValue(kCmd, option, value, expected);
}

// Parses and checks every option; returns 0, or the exit status (2) after
// printing an error that names the option and the value.
int ParseOptions(const std::vector<std::string>& args, Options* o) {
  po::options_description desc("baton bench collectives options");
  std::string minb = "8", maxb = "64M", backend = "mpi", algo = "auto", op = "sum", dtype = "f32",
              collective = "all_reduce";
  desc.add_options()
      ("minbytes,b", po::value(&minb), "smallest size in bytes (K/M/G suffixes), default 8")
      ("maxbytes,e", po::value(&maxb), "largest size in bytes (K/M/G suffixes), default 64M")
      ("stepfactor,f", po::value(&o->step_factor), "multiply the size by this, default 2")
      ("iters,n", po::value(&o->iters), "timed iterations per size, default 20")
      ("warmup_iters,w", po::value(&o->warmup), "untimed iterations per size, default 5")
      ("check,c", po::value(&o->check), "1: check results against a reference, 0: don't; default 1")
      ("backend", po::value(&backend), "mpi, nccl or auto; default mpi")
      ("algo", po::value(&algo), "native, hierarchical, ring, auto or all; default auto")
      ("op", po::value(&op), "sum, max, min or avg; default sum")
      ("dtype", po::value(&dtype), "f32, f64, bf16, f16, i32, i64, u8; default f32")
      ("collective", po::value(&collective), "all_reduce, all_gather, reduce_scatter, broadcast, all_to_all")
      ("json", po::bool_switch(&o->json), "one JSON object per line instead of the table")
      ("tune", po::value(&o->tune_path)->implicit_value(""),
       "measure the all-reduce algorithms and save the fastest per size for algorithm auto "
       "(--tune=FILE; default $BATON_TUNE_FILE, $XDG_CACHE_HOME/baton/tune.json, ~/.cache/baton/tune.json)")
      ("help,h", "print this text");
  po::variables_map vm;
  if (int rc = ParseBenchArgs(kCmd, "baton bench collectives [OPTIONS]", desc, args, &vm); rc != 0) return rc;
  if (!ParseBytes(minb, &o->min_bytes) || o->min_bytes == 0)
    return BadValue("--minbytes", minb, "a byte count >= 1 such as 8, 1K, 64M");
  if (!ParseBytes(maxb, &o->max_bytes)) return BadValue("--maxbytes", maxb, "a byte count such as 8, 1K, 64M");
  if (o->max_bytes < o->min_bytes)
    return BadValue("--maxbytes", maxb, "at least --minbytes (" + minb + ")");
  if (o->step_factor < 2) return BadValue("--stepfactor", std::to_string(o->step_factor), "an integer >= 2");
  if (o->iters < 1) return BadValue("--iters", std::to_string(o->iters), "an integer >= 1");
  if (o->warmup < 0) return BadValue("--warmup_iters", std::to_string(o->warmup), "an integer >= 0");
  if (o->check != 0 && o->check != 1) return BadValue("--check", std::to_string(o->check), "0 or 1");
  if (!ParseBackend(backend, &o->backend).ok()) return BadValue("--backend", backend, "mpi, nccl or auto");
  Algorithm a;
  if (algo == "all")
    o->algos = {Algorithm::kNative, Algorithm::kHierarchical, Algorithm::kRing, Algorithm::kAuto};
  else if (ParseAlgorithm(algo, &a).ok())
    o->algos = {a};
  else
    return BadValue("--algo", algo, "native, hierarchical, ring, auto or all");
  if (!ParseReduceOp(op, &o->op).ok()) return BadValue("--op", op, "sum, max, min or avg");
  if (!ParseDType(dtype, &o->dtype).ok()) return BadValue("--dtype", dtype, DTypeNames());
  if (!ParseCollective(collective, &o->collective))
    return BadValue("--collective", collective, "all_reduce, all_gather, reduce_scatter, broadcast or all_to_all");
  if (vm.count("tune")) {
    o->tune = true;
    if (o->collective != Collective::kAllReduce)
      return BadValue("--collective", collective, "all_reduce with --tune (the table is for all-reduce)");
    if (vm.count("algo")) return BadValue("--algo", algo, "no --algo with --tune (it measures all three)");
    if (o->backend == Backend::kNccl) return BadValue("--backend", backend, "mpi with --tune");
    o->backend = Backend::kMpi;  // the table is the mpi backend's, also where auto would pick nccl
    o->algos = {Algorithm::kNative, Algorithm::kHierarchical, Algorithm::kRing};
    if (o->tune_path.empty()) o->tune_path = mpi::DefaultTunePath();
    if (o->tune_path.empty())
      return BadValue("--tune", "", "a file: none of BATON_TUNE_FILE, XDG_CACHE_HOME, HOME is set");
  }
  return 0;
}

// --- the raw MPI call beside baton's (the nccl side is cli/nccl_bench.cc) ----------
bool IsHalf(DType t) { return t == DType::kF16 || t == DType::kBF16; }

// halves are compared with MPI on f32 (MPI has no f16): their work type.
MPI_Datatype RawType(DType t) { return mpi::MpiType(mpi::WorkType(t)); }

MPI_Op RawOp(ReduceOp op) {
  return op == ReduceOp::kMax ? MPI_MAX : op == ReduceOp::kMin ? MPI_MIN : MPI_SUM;  // avg: MPI has none
}

struct Buffers {
  HostBuffers host;
  std::vector<float> wide_send, wide_recv;  // raw MPI's buffers for f16/bf16 reductions
};

void FillAll(const Case& c, Buffers* b) {
  Fill(c, &b->host);
  b->wide_send.assign(c.reduces() && IsHalf(c.t) ? c.send_elems() : 0, 1.0f);
  b->wide_recv.assign(c.reduces() && IsHalf(c.t) ? c.recv_elems() : 0, 0.0f);
}

// The same operation straight through MPI, on the same buffers (f16/bf16
// reductions on f32 buffers of the same count: MPI has no half types).
int RunMpi(MPI_Comm world, const Case& c, Buffers* b) {
  const int B = static_cast<int>(c.block);
  const int bb = static_cast<int>(c.block * DTypeSize(c.t));
  const bool wide = IsHalf(c.t);
  HostBuffers& h = b->host;
  void* rs = wide ? static_cast<void*>(b->wide_send.data()) : h.send.data();
  void* rr = wide ? static_cast<void*>(b->wide_recv.data()) : h.recv.data();
  switch (c.coll) {
    case Collective::kAllReduce: return MPI_Allreduce(rs, rr, B, RawType(c.t), RawOp(c.op), world);
    case Collective::kReduceScatter: return MPI_Reduce_scatter_block(rs, rr, B, RawType(c.t), RawOp(c.op), world);
    case Collective::kAllGather: return MPI_Allgather(h.send.data(), bb, MPI_BYTE, h.recv.data(), bb, MPI_BYTE, world);
    case Collective::kBroadcast: return MPI_Bcast(h.recv.data(), bb, MPI_BYTE, 0, world);
    case Collective::kAllToAll: return MPI_Alltoall(h.send.data(), bb, MPI_BYTE, h.recv.data(), bb, MPI_BYTE, world);
  }
  return MPI_ERR_OTHER;
}

// The benchmark's own MPI calls under the collective deadline: MPI's
// blocking call (the raw baseline stays raw) while a watchdog thread ends
// the process with 75 once a call has run past BATON_COLLECTIVE_TIMEOUT,
// naming it. Arming costs two uncontended locks, outside the timed region.
class Deadlined {
 public:
  static Status Make(const Runtime& rt, std::unique_ptr<Deadlined>* out) {
    double seconds = 0;
    BATON_RETURN_IF_ERROR(mpi::ResolveCollectiveTimeout(0, &seconds));
    out->reset(new Deadlined(rt, seconds));
    return Status::OK();
  }
  // Runs `call` (an MPI call returning its code) watched under `label`.
  template <typename F>
  int Run(const char* label, F call) const {
    mpi::CallInfo info;
    info.label = label;
    watchdog_.Arm(0, info);
    const int rc = call();
    watchdog_.Disarm(0);
    return rc;
  }
  void Barrier(MPI_Comm world) const {
    Run("MPI_Barrier of the benchmark (before a measurement)", [world] { return MPI_Barrier(world); });
  }

 private:
  Deadlined(const Runtime& rt, double seconds)
      : watchdog_(seconds, [&rt, seconds](const mpi::CallInfo& info) {
          mpi::ExitForRequeue(mpi::TimeoutStatus(&rt, info.label, seconds));
        }) {}
  mutable mpi::Watchdog watchdog_;
};

// Every rank's verdict on one step: the slowest rank's time and whether any
// rank failed, in one MPI_Allreduce, so that all ranks stop together.
struct Agreed {
  double seconds = 0;
  bool failed = false;
};
Agreed Agree(const Deadlined& d, MPI_Comm world, double seconds, bool failed) {
  double in[2] = {seconds, failed ? 1.0 : 0.0}, out[2] = {0, 1};
  const int rc = d.Run("MPI_Allreduce of the benchmark (agreeing on a measurement)",
                       [&] { return MPI_Allreduce(in, out, 2, MPI_DOUBLE, MPI_MAX, world); });
  if (rc != MPI_SUCCESS) return {0, true};
  return {out[0], out[1] != 0};
}

// Prints this rank's failure and returns 1; every rank calls it together.
int Failed(const Status& mine, int rank) {
  if (!mine.ok())
    std::cerr << kCmd << ": " << mine << "\n";
  else if (rank == 0)
    std::cerr << kCmd << ": stopped: another rank failed (see its message)\n";
  return 1;
}

// Measures one size with every communicator (one per algorithm). Each
// iteration runs every algorithm once, in an order rotated per iteration,
// then the raw MPI collective: drift of this shared machine then hits all of
// them alike, which timing them one after another would not. Returns 0, or 1
// after every rank printed (a failure of any rank stops all of them).
int Measure(std::vector<std::unique_ptr<Communicator>>& comms, const Deadlined& d, MPI_Comm world, const Case& c,
            const Options& o, Buffers* b, std::vector<Row>* rows) {
  const size_t n = comms.size();
  Status mine;
  for (size_t k = 0; k < n; ++k) {
    if (!o.check) break;
    FillAll(c, b);
    mine = RunCollective(*comms[k], c, b->host.send.data(), b->host.recv.data());
    const bool good = mine.ok() && FirstMismatch(c, b->host.recv.data(), b->host.want.data()) < 0;
    Agreed a = Agree(d, world, good ? 0.0 : 1.0, !mine.ok());
    if (a.failed) return Failed(mine, c.R);
    (*rows)[k].ok = a.seconds == 0 ? 1 : 0;
  }
  FillAll(c, b);
  std::vector<std::vector<double>> baton_t(n);
  std::vector<double> mpi_t;
  for (long i = 0; i < o.warmup + o.iters; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const size_t k = (static_cast<size_t>(i) + j) % n;
      d.Barrier(world);
      double t0 = MPI_Wtime();
      mine = RunCollective(*comms[k], c, b->host.send.data(), b->host.recv.data());
      Agreed a = Agree(d, world, MPI_Wtime() - t0, !mine.ok());
      if (a.failed) return Failed(mine, c.R);
      if (i >= o.warmup) baton_t[k].push_back(a.seconds);
    }
    d.Barrier(world);
    double t0 = 0, t1 = 0;
    const int rc = d.Run("raw MPI collective of the benchmark (the baseline)", [&] {
      t0 = MPI_Wtime();
      const int code = RunMpi(world, c, b);
      t1 = MPI_Wtime();
      return code;
    });
    Agreed m = Agree(d, world, t1 - t0, rc != MPI_SUCCESS);
    if (m.failed) {
      if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, text, &len);
        mine = Status::IOError("cli", std::string("raw MPI ") + CollectiveName(c.coll) +
                                          " failed: " + std::string(text, static_cast<size_t>(len)));
      }
      return Failed(mine, c.R);
    }
    if (i >= o.warmup) mpi_t.push_back(m.seconds);
  }
  for (size_t k = 0; k < n; ++k) {
    (*rows)[k].time_us = Median(baton_t[k]) * 1e6;
    (*rows)[k].raw_time_us = Median(mpi_t) * 1e6;
  }
  return 0;
}

// Rank 0 merges this job shape's measurements into the file; every rank
// learns whether that worked.
int SaveTune(const Options& o, const Runtime& rt, const Deadlined& d, const std::map<size_t, mpi::TunedAlgo>& best) {
  Status s;
  if (rt.rank() == 0) {
    mpi::TuneTable table;
    std::string text;
    bool exists = false;
    s = mpi::ReadTuneFile(o.tune_path, &text, &exists);
    if (s.ok() && exists) {
      Status p = mpi::ParseTuneTable(text, o.tune_path, &table);
      if (!p.ok()) std::cerr << kCmd << ": replacing it: " << p << "\n";  // other shapes are lost
    }
    if (s.ok()) {
      table[mpi::KeyOf(rt.topology())] = best;
      s = mpi::WriteTuneFile(o.tune_path, mpi::FormatTuneTable(table));
    }
    if (s.ok()) std::cerr << kCmd << ": wrote the tuning table to " << o.tune_path << "\n";
  }
  if (Agree(d, rt.world_comm(), 0, !s.ok()).failed) return Failed(s, rt.rank());
  return 0;
}

// The sizes of the size column: min, min*f, ... up to max.
std::vector<size_t> Sizes(const Options& o) {
  std::vector<size_t> out;
  for (size_t size = o.min_bytes;; size *= static_cast<size_t>(o.step_factor)) {
    out.push_back(size);
    if (size > o.max_bytes / static_cast<size_t>(o.step_factor)) break;
  }
  return out;
}

void PrintPreamble(const Options& o, const Runtime& rt, Backend backend, const char* raw, const PrintSpec& spec) {
  if (rt.rank() != 0 || o.json) return;
  std::printf("# baton bench collectives: %s, op %s, dtype %s, backend %s, %d ranks on %d node(s)%s, "
              "iters %ld, warmup %ld, check %ld\n",
              CollectiveName(o.collective), std::string(ReduceOpName(o.op)).c_str(),
              std::string(DTypeName(o.dtype)).c_str(), std::string(BackendName(backend)).c_str(), rt.size(),
              rt.num_nodes(), rt.topology().Uniform() ? "" : " (uneven)", o.iters, o.warmup, o.check);
  if (backend == Backend::kNccl)
    std::printf("# times: median over iterations of the slowest rank; every iteration runs baton's collective\n"
                "# on device buffers, then the raw NCCL call on the same communicator and buffers (%s_time_us)\n",
                raw);
  else
    std::printf("# times: median over iterations of the slowest rank; every iteration runs each algorithm, in\n"
                "# rotated order, then the raw MPI call (%s_time_us)\n",
                raw);
  PrintHeader(spec);
}

#if BATON_HAVE_NCCL
// The nccl backend: device buffers, against the raw NCCL call (cli/nccl_bench.cc).
int RunNccl(const Options& o, Runtime& rt, const Deadlined& d, Communicator& comm) {
  auto* nc = dynamic_cast<nccl::NcclCommunicator*>(&comm);
  if (nc == nullptr) return Failed(Status::Internal("cli", "the nccl communicator is not an NcclCommunicator"), 0);
  // Loaded already: the communicator was made with it.
  const nccl::NcclApi* api = nullptr;
  if (Status s = nccl::RealNcclApi(&api); !s.ok()) return Failed(s, 0);
  const MPI_Comm world = rt.world_comm();
  RankSync sync;
  sync.barrier = [&d, world] { d.Barrier(world); };
  sync.agree = [&d, world](double seconds, bool failed, double* slowest, bool* any_failed) {
    const Agreed a = Agree(d, world, seconds, failed);
    *slowest = a.seconds;
    *any_failed = a.failed;
  };
  sync.share_id = [&d, world](ncclUniqueId* id) {
    const int rc = d.Run("MPI_Bcast of the benchmark (the raw baseline's NCCL id)",
                         [&] { return MPI_Bcast(id, sizeof *id, MPI_BYTE, 0, world); });
    return rc == MPI_SUCCESS ? Status::OK()
                             : Status::IOError("cli", "MPI_Bcast of the raw baseline's NCCL id failed with " +
                                                          std::to_string(rc));
  };
  std::unique_ptr<RawComm> raw;
  if (Status s = RawComm::Make(*api, *nc, sync, &raw); !s.ok()) {
    if (s.code() != Code::kAborted || rt.rank() == 0) std::cerr << kCmd << ": " << s << "\n";
    return 1;
  }
  const PrintSpec spec{o.json, Backend::kNccl, "nccl", rt.num_nodes()};
  PrintPreamble(o, rt, Backend::kNccl, spec.raw, spec);
  NcclBenchOptions no;
  no.iters = o.iters, no.warmup = o.warmup, no.check = o.check != 0;
  bool all_ok = true;
  for (size_t size : Sizes(o)) {
    const Case c = Case::For(o.collective, o.dtype, o.op, rt.size(), rt.rank(), size);
    Row row;
    row.algo = row.chosen = Algorithm::kNative;
    if (Status s = MeasureNccl(*nc, *raw, *api, c, no, sync, &row); !s.ok()) {
      if (s.code() != Code::kAborted || rt.rank() == 0) std::cerr << kCmd << ": " << s << "\n";
      return 1;
    }
    all_ok = all_ok && row.ok != 0;
    if (rt.rank() == 0) PrintRow(spec, c, row);
  }
  if (!all_ok) {
    if (rt.rank() == 0) std::cerr << kCmd << ": results differ from the reference (ok NO above)\n";
    return 1;
  }
  return 0;
}
#endif

}  // namespace

int BenchCollectivesCommand(const std::vector<std::string>& args) {
  Options o;
  // Every rank parses the same arguments, so all exit here alike, before MPI.
  if (int rc = ParseOptions(args, &o); rc != 0) return rc < 0 ? 0 : rc;

  std::unique_ptr<Runtime> rt;
  if (Status s = Runtime::Create(nullptr, nullptr, {}, &rt); !s.ok()) {
    std::cerr << kCmd << ": " << s << "\n";
    return 1;
  }
  const MPI_Comm world = rt->world_comm();
  const int R = rt->rank();
  std::unique_ptr<Deadlined> deadlined;
  if (Status s = Deadlined::Make(*rt, &deadlined); !s.ok()) {
    std::cerr << kCmd << ": " << s << "\n";
    return 1;
  }
  const Deadlined& d = *deadlined;

  // One communicator per algorithm, created up front (collective calls);
  // nccl (asked for, or chosen by auto on a GPU machine) needs just one:
  // NCCL picks its own algorithms.
  std::vector<std::unique_ptr<Communicator>> comms(o.algos.size());
  for (size_t i = 0; i < o.algos.size(); ++i) {
    CommOptions co;
    co.backend = o.backend;
    co.algorithm = o.algos[i];
    Status s = CreateCommunicator(*rt, co, &comms[i]);
    if (Agree(d, world, 0, !s.ok()).failed) return Failed(s, R);
    if (comms[i]->backend() == Backend::kNccl) {
#if BATON_HAVE_NCCL
      return RunNccl(o, *rt, d, *comms[i]);
#else
      return Failed(Status::Internal("cli", "an nccl communicator in a build without NCCL"), R);
#endif
    }
  }

  const PrintSpec spec{o.json, Backend::kMpi, "mpi", rt->num_nodes()};
  PrintPreamble(o, *rt, Backend::kMpi, spec.raw, spec);

  Buffers buffers;
  std::map<size_t, mpi::TunedAlgo> best;
  bool all_ok = true;
  for (size_t size : Sizes(o)) {
    const Case c = Case::For(o.collective, o.dtype, o.op, rt->size(), R, size);
    std::vector<Row> rows(o.algos.size());
    for (size_t i = 0; i < o.algos.size(); ++i) rows[i].algo = o.algos[i];
    if (int rc = Measure(comms, d, world, c, o, &buffers, &rows); rc != 0) return rc;
    for (size_t i = 0; i < o.algos.size(); ++i) {
      Row& row = rows[i];
      all_ok = all_ok && row.ok != 0;
      // What auto ran, once measured: the table's choice or the online one.
      row.chosen = row.algo;
      if (row.algo == Algorithm::kAuto) (void)mpi::AutoAlgorithmOf(*comms[i], c.bytes(), &row.chosen);
      if (R == 0) PrintRow(spec, c, row);
    }
    // --tune measures exactly native, hierarchical, ring, in that order.
    if (o.tune) best[c.bytes()] = mpi::PickTuned(rows[0].time_us, rows[1].time_us, rows[2].time_us);
  }
  if (o.tune)
    if (int rc = SaveTune(o, *rt, d, best); rc != 0) return rc;
  if (!all_ok) {
    if (R == 0) std::cerr << kCmd << ": results differ from the reference (ok NO above)\n";
    return 1;
  }
  return 0;
}

}  // namespace baton::cli
