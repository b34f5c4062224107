// baton bench collectives: baton's collectives against the raw MPI call,
// in the manner of nccl-tests. For every size, iteration i runs baton's
// collective once per algorithm asked (in an order rotated per iteration)
// and then the matching MPI collective on the same buffers, each after an
// MPI_Barrier and each timed as the slowest rank's time (an MPI_Allreduce
// MAX); the medians are reported. Interleaving them in one loop keeps drift
// (other jobs, frequency, caches) out of the comparison.
// --tune measures the three all-reduce algorithms and saves, per size, the
// fastest for this job shape; algorithm auto reads that table.
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

#include "baton/communicator.h"
#include "baton/runtime.h"
#include "cli/byte_size.h"
#include "cli/commands.h"
#include "cli/median.h"
#include "mpi_runtime/mpi/mpi_communicator.h"
#include "mpi_runtime/mpi/tune_table.h"

namespace baton::cli {
namespace {

namespace po = boost::program_options;
constexpr const char* kCmd = "baton bench collectives";

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kAllToAll };
constexpr const char* kCollectiveNames[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all"};

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
  std::cerr << kCmd << ": " << option << ": invalid value '" << value << "' (expected " << expected << ")\n";
  return 2;
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
  try {
    po::store(po::command_line_parser(args).options(desc).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << kCmd << ": " << e.what() << "\n" << desc;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << "usage: baton bench collectives [OPTIONS]\n" << desc;
    return -1;
  }
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
  if (!ParseDType(dtype, &o->dtype).ok()) return BadValue("--dtype", dtype, "f32, f64, bf16, f16, i32, i64 or u8");
  bool found = false;
  for (int i = 0; i < 5; ++i)
    if (collective == kCollectiveNames[i]) o->collective = static_cast<Collective>(i), found = true;
  if (!found)
    return BadValue("--collective", collective, "all_reduce, all_gather, reduce_scatter, broadcast or all_to_all");
  if (vm.count("tune")) {
    o->tune = true;
    if (o->collective != Collective::kAllReduce)
      return BadValue("--collective", collective, "all_reduce with --tune (the table is for all-reduce)");
    if (vm.count("algo")) return BadValue("--algo", algo, "no --algo with --tune (it measures all three)");
    if (o->backend == Backend::kNccl) return BadValue("--backend", backend, "mpi with --tune");
    o->algos = {Algorithm::kNative, Algorithm::kHierarchical, Algorithm::kRing};
    if (o->tune_path.empty()) o->tune_path = mpi::DefaultTunePath();
    if (o->tune_path.empty())
      return BadValue("--tune", "", "a file: none of BATON_TUNE_FILE, XDG_CACHE_HOME, HOME is set");
  }
  return 0;
}

// --- the reference, as tests/mpi/collectives_test.cc computes it ---------------
// Small integer inputs keep every sum exact, even in bf16; f16/bf16 results
// are rounded once from f32, as the backend promises, so the check is
// bit-exact.
double Input(int r, size_t i) { return static_cast<double>((static_cast<size_t>(r) * 7 + i * 3) % 5); }

double Reference(ReduceOp op, int P, size_t i, DType t) {
  double acc = Input(0, i);
  for (int r = 1; r < P; ++r) {
    const double v = Input(r, i);
    acc = op == ReduceOp::kMax ? std::max(acc, v) : op == ReduceOp::kMin ? std::min(acc, v) : acc + v;
  }
  if (op == ReduceOp::kAvg) acc = t == DType::kF64 ? acc / P : static_cast<float>(acc) / static_cast<float>(P);
  return acc;
}

// --- one size: buffers, baton's call, MPI's call --------------------------------
struct Case {
  Collective coll;
  DType t;
  ReduceOp op;
  int P = 1, R = 0;
  size_t block = 0;  // elements per rank's block (all of the buffer for all_reduce/broadcast)
  size_t total() const {  // elements in the size column (nccl-tests' count)
    return coll == Collective::kAllReduce || coll == Collective::kBroadcast ? block
                                                                             : block * static_cast<size_t>(P);
  }
  size_t bytes() const { return total() * DTypeSize(t); }
  // nccl-tests' PERFORMANCE.md: busbw = algbw * factor.
  double BusFactor() const {
    const double n = P;
    switch (coll) {
      case Collective::kAllReduce: return 2 * (n - 1) / n;
      case Collective::kBroadcast: return 1;
      default: return (n - 1) / n;
    }
  }
};

bool IsHalf(DType t) { return t == DType::kF16 || t == DType::kBF16; }

MPI_Datatype RawType(DType t) {
  switch (t) {
    case DType::kF64: return MPI_DOUBLE;
    case DType::kI32: return MPI_INT32_T;
    case DType::kI64: return MPI_INT64_T;
    case DType::kU8: return MPI_UINT8_T;
    default: return MPI_FLOAT;  // f32; halves are compared with MPI on f32 (MPI has no f16)
  }
}

MPI_Op RawOp(ReduceOp op) {
  return op == ReduceOp::kMax ? MPI_MAX : op == ReduceOp::kMin ? MPI_MIN : MPI_SUM;  // avg: MPI has none
}

struct Buffers {
  std::vector<char> send, recv, want;
  std::vector<float> wide_send, wide_recv;  // raw MPI's buffers for f16/bf16 reductions
};

size_t SendElems(const Case& c) {
  switch (c.coll) {
    case Collective::kAllGather: return c.block;
    case Collective::kBroadcast: return 0;
    default: return c.total();
  }
}
size_t RecvElems(const Case& c) { return c.coll == Collective::kReduceScatter ? c.block : c.total(); }

void Fill(const Case& c, Buffers* b) {
  const size_t e = DTypeSize(c.t);
  b->send.assign(SendElems(c) * e + 1, 0);
  b->recv.assign(RecvElems(c) * e + 1, 0);
  b->want.assign(RecvElems(c) * e + 1, 0);
  for (size_t i = 0; i < SendElems(c); ++i) StoreValue(c.t, Input(c.R, i), b->send.data(), i);
  const size_t B = c.block;
  switch (c.coll) {
    case Collective::kAllReduce:
      for (size_t i = 0; i < B; ++i) StoreValue(c.t, Reference(c.op, c.P, i, c.t), b->want.data(), i);
      break;
    case Collective::kReduceScatter:
      for (size_t i = 0; i < B; ++i) StoreValue(c.t, Reference(c.op, c.P, c.R * B + i, c.t), b->want.data(), i);
      break;
    case Collective::kAllGather:
      for (int r = 0; r < c.P; ++r)
        for (size_t i = 0; i < B; ++i) StoreValue(c.t, Input(r, i), b->want.data(), r * B + i);
      break;
    case Collective::kBroadcast:  // root 0's buffer, in place
      for (size_t i = 0; i < B; ++i) {
        StoreValue(c.t, Input(0, i), b->want.data(), i);
        if (c.R == 0) StoreValue(c.t, Input(0, i), b->recv.data(), i);
      }
      break;
    case Collective::kAllToAll:  // block r of the result is block R of rank r's input
      for (int r = 0; r < c.P; ++r)
        for (size_t i = 0; i < B; ++i) StoreValue(c.t, Input(r, c.R * B + i), b->want.data(), r * B + i);
      break;
  }
  const bool reduces = c.coll == Collective::kAllReduce || c.coll == Collective::kReduceScatter;
  b->wide_send.assign(reduces && IsHalf(c.t) ? SendElems(c) : 0, 1.0f);
  b->wide_recv.assign(reduces && IsHalf(c.t) ? RecvElems(c) : 0, 0.0f);
}

Status RunBaton(Communicator& comm, const Case& c, Buffers* b) {
  const size_t B = c.block;
  switch (c.coll) {
    case Collective::kAllReduce: return comm.AllReduce(b->send.data(), b->recv.data(), B, c.t, c.op);
    case Collective::kAllGather: return comm.AllGather(b->send.data(), b->recv.data(), B, c.t);
    case Collective::kReduceScatter: return comm.ReduceScatter(b->send.data(), b->recv.data(), B, c.t, c.op);
    case Collective::kBroadcast: return comm.Broadcast(b->recv.data(), B, c.t, 0);
    case Collective::kAllToAll: return comm.AllToAll(b->send.data(), b->recv.data(), B, c.t);
  }
  return Status::Internal("cli", "unknown collective");
}

// The same operation straight through MPI, on the same buffers (f16/bf16
// reductions on f32 buffers of the same count: MPI has no half types).
int RunMpi(MPI_Comm world, const Case& c, Buffers* b) {
  const int B = static_cast<int>(c.block);
  const int bb = static_cast<int>(c.block * DTypeSize(c.t));
  const bool wide = IsHalf(c.t);
  void* rs = wide ? static_cast<void*>(b->wide_send.data()) : b->send.data();
  void* rr = wide ? static_cast<void*>(b->wide_recv.data()) : b->recv.data();
  switch (c.coll) {
    case Collective::kAllReduce: return MPI_Allreduce(rs, rr, B, RawType(c.t), RawOp(c.op), world);
    case Collective::kReduceScatter: return MPI_Reduce_scatter_block(rs, rr, B, RawType(c.t), RawOp(c.op), world);
    case Collective::kAllGather: return MPI_Allgather(b->send.data(), bb, MPI_BYTE, b->recv.data(), bb, MPI_BYTE, world);
    case Collective::kBroadcast: return MPI_Bcast(b->recv.data(), bb, MPI_BYTE, 0, world);
    case Collective::kAllToAll: return MPI_Alltoall(b->send.data(), bb, MPI_BYTE, b->recv.data(), bb, MPI_BYTE, world);
  }
  return MPI_ERR_OTHER;
}

// Every rank's verdict on one step: the slowest rank's time and whether any
// rank failed, in one MPI_Allreduce, so that all ranks stop together.
struct Agreed {
  double seconds = 0;
  bool failed = false;
};
Agreed Agree(MPI_Comm world, double seconds, bool failed) {
  double in[2] = {seconds, failed ? 1.0 : 0.0}, out[2] = {0, 1};
  if (MPI_Allreduce(in, out, 2, MPI_DOUBLE, MPI_MAX, world) != MPI_SUCCESS) return {0, true};
  return {out[0], out[1] != 0};
}

struct Row {
  Algorithm algo;
  double time_us = 0, mpi_time_us = 0;
  int ok = -1;  // -1 not checked
};

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
int Measure(std::vector<std::unique_ptr<Communicator>>& comms, MPI_Comm world, const Case& c, const Options& o,
            Buffers* b, std::vector<Row>* rows) {
  const size_t n = comms.size();
  Status mine;
  for (size_t k = 0; k < n; ++k) {
    if (!o.check) break;
    Fill(c, b);
    mine = RunBaton(*comms[k], c, b);
    int good = mine.ok() && std::memcmp(b->recv.data(), b->want.data(), RecvElems(c) * DTypeSize(c.t)) == 0;
    Agreed a = Agree(world, good ? 0.0 : 1.0, !mine.ok());
    if (a.failed) return Failed(mine, c.R);
    (*rows)[k].ok = a.seconds == 0 ? 1 : 0;
  }
  Fill(c, b);
  std::vector<std::vector<double>> baton_t(n);
  std::vector<double> mpi_t;
  for (long i = 0; i < o.warmup + o.iters; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const size_t k = (static_cast<size_t>(i) + j) % n;
      MPI_Barrier(world);
      double t0 = MPI_Wtime();
      mine = RunBaton(*comms[k], c, b);
      Agreed a = Agree(world, MPI_Wtime() - t0, !mine.ok());
      if (a.failed) return Failed(mine, c.R);
      if (i >= o.warmup) baton_t[k].push_back(a.seconds);
    }
    MPI_Barrier(world);
    double t0 = MPI_Wtime();
    const int rc = RunMpi(world, c, b);
    Agreed m = Agree(world, MPI_Wtime() - t0, rc != MPI_SUCCESS);
    if (m.failed) {
      if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, text, &len);
        mine = Status::IOError("cli", std::string("raw MPI ") + kCollectiveNames[static_cast<int>(c.coll)] +
                                          " failed: " + std::string(text, static_cast<size_t>(len)));
      }
      return Failed(mine, c.R);
    }
    if (i >= o.warmup) mpi_t.push_back(m.seconds);
  }
  for (size_t k = 0; k < n; ++k) {
    (*rows)[k].time_us = Median(baton_t[k]) * 1e6;
    (*rows)[k].mpi_time_us = Median(mpi_t) * 1e6;
  }
  return 0;
}

double GBps(size_t bytes, double us) { return us > 0 ? static_cast<double>(bytes) / (us * 1e-6) / 1e9 : 0; }

void Print(const Options& o, const Case& c, const Communicator& comm, const Runtime& rt, const Row& r,
           Algorithm chosen) {
  const double algbw = GBps(c.bytes(), r.time_us), busbw = algbw * c.BusFactor();
  const double ratio = r.time_us > 0 ? r.mpi_time_us / r.time_us : 0;
  if (o.json) {
    nlohmann::ordered_json j;
    j["collective"] = kCollectiveNames[static_cast<int>(c.coll)];
    j["backend"] = BackendName(comm.backend());
    j["algo"] = AlgorithmName(r.algo);
    if (r.algo == Algorithm::kAuto) j["auto_algo"] = AlgorithmName(chosen);
    j["op"] = ReduceOpName(c.op);
    j["dtype"] = DTypeName(c.t);
    j["bytes"] = c.bytes();
    j["count"] = c.total();
    j["ranks"] = c.P;
    j["nodes"] = rt.num_nodes();
    j["time_us"] = r.time_us;
    j["algbw"] = algbw;
    j["busbw"] = busbw;
    j["bus_factor"] = c.BusFactor();
    j["ok"] = r.ok < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.ok == 1);
    j["mpi_time_us"] = r.mpi_time_us;
    j["mpi_busbw"] = GBps(c.bytes(), r.mpi_time_us) * c.BusFactor();
    j["mpi_ratio"] = ratio;
    std::cout << j.dump() << std::endl;
    return;
  }
  std::string algo(AlgorithmName(r.algo));
  if (r.algo == Algorithm::kAuto) algo += "(" + std::string(AlgorithmName(chosen)) + ")";
  std::printf("%12zu %11zu %6s %18s %12.2f %11.3f %11.3f %4s %12.2f %9.3f\n", c.bytes(), c.total(),
              std::string(DTypeName(c.t)).c_str(), algo.c_str(), r.time_us, algbw, busbw,
              r.ok < 0 ? "-" : r.ok ? "yes" : "NO", r.mpi_time_us, ratio);
  std::fflush(stdout);
}

// Rank 0 merges this job shape's measurements into the file; every rank
// learns whether that worked.
int SaveTune(const Options& o, const Runtime& rt, const std::map<size_t, mpi::TunedAlgo>& best) {
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
  if (Agree(rt.world_comm(), 0, !s.ok()).failed) return Failed(s, rt.rank());
  return 0;
}

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
  const int P = rt->size(), R = rt->rank();

  // One communicator per algorithm, created up front (collective calls).
  std::vector<std::unique_ptr<Communicator>> comms(o.algos.size());
  for (size_t i = 0; i < o.algos.size(); ++i) {
    CommOptions co;
    co.backend = o.backend;
    co.algorithm = o.algos[i];
    Status s = CreateCommunicator(*rt, co, &comms[i]);
    // The benchmark's buffers are host memory; NCCL wants device memory.
    if (s.ok() && comms[i]->backend() == Backend::kNccl)
      s = Status::Unavailable("cli", "bench collectives: the nccl backend (device buffers) is not benchmarked yet; "
                                     "use --backend mpi");
    if (Agree(world, 0, !s.ok()).failed) return Failed(s, R);
  }

  if (R == 0 && !o.json) {
    const Topology& topo = rt->topology();
    std::printf("# baton bench collectives: %s, op %s, dtype %s, backend %s, %d ranks on %d node(s)%s, "
                "iters %ld, warmup %ld, check %ld\n",
                kCollectiveNames[static_cast<int>(o.collective)], std::string(ReduceOpName(o.op)).c_str(),
                std::string(DTypeName(o.dtype)).c_str(), std::string(BackendName(comms[0]->backend())).c_str(), P,
                rt->num_nodes(), topo.Uniform() ? "" : " (uneven)", o.iters, o.warmup, o.check);
    std::printf("# times: median over iterations of the slowest rank; every iteration runs each algorithm, in\n"
                "# rotated order, then the raw MPI call (mpi_time_us)\n");
    std::printf("%12s %11s %6s %18s %12s %11s %11s %4s %12s %9s\n", "size(B)", "count", "dtype", "algo",
                "time_us", "algbw(GB/s)", "busbw(GB/s)", "ok", "mpi_time_us", "mpi/time");
    std::fflush(stdout);
  }

  // What auto chooses, for the algo column only: the communicators load
  // (and broadcast) the same file themselves.
  mpi::TuneTable shown_table;
  if (R == 0) {
    std::string text;
    bool exists = false;
    const std::string path = mpi::DefaultTunePath();
    if (!path.empty() && mpi::ReadTuneFile(path, &text, &exists).ok() && exists)
      (void)mpi::ParseTuneTable(text, path, &shown_table);  // a bad table: the communicator warned, auto is native
  }

  Buffers buffers;
  std::map<size_t, mpi::TunedAlgo> best;
  bool all_ok = true;
  const size_t esize = DTypeSize(o.dtype);
  for (size_t size = o.min_bytes;; size *= static_cast<size_t>(o.step_factor)) {
    Case c{o.collective, o.dtype, o.op, P, R, 0};
    // Elements per block: the size rounded down to whole elements (whole
    // blocks for the per-rank collectives), at least one.
    const size_t elems = std::max<size_t>(1, size / esize);
    c.block = c.coll == Collective::kAllReduce || c.coll == Collective::kBroadcast
                  ? elems
                  : std::max<size_t>(1, elems / static_cast<size_t>(P));
    double fastest = 0;
    std::vector<Row> rows(o.algos.size());
    for (size_t i = 0; i < o.algos.size(); ++i) rows[i].algo = o.algos[i];
    if (int rc = Measure(comms, world, c, o, &buffers, &rows); rc != 0) return rc;
    for (size_t i = 0; i < o.algos.size(); ++i) {
      const Row& row = rows[i];
      all_ok = all_ok && row.ok != 0;
      const Algorithm chosen = mpi::ChooseAlgorithm(row.algo, c.bytes(), rt->topology(), &shown_table);
      if (R == 0) Print(o, c, *comms[i], *rt, row, row.algo == Algorithm::kAuto ? chosen : row.algo);
      if (o.tune && (i == 0 || row.time_us < fastest)) {
        fastest = row.time_us;
        best[c.bytes()] = row.algo == Algorithm::kRing           ? mpi::TunedAlgo::kRing
                          : row.algo == Algorithm::kHierarchical ? mpi::TunedAlgo::kHierarchical
                                                                 : mpi::TunedAlgo::kNative;
      }
    }
    if (size > o.max_bytes / static_cast<size_t>(o.step_factor)) break;
  }
  if (o.tune)
    if (int rc = SaveTune(o, *rt, best); rc != 0) return rc;
  if (!all_ok) {
    if (R == 0) std::cerr << kCmd << ": results differ from the reference (ok NO above)\n";
    return 1;
  }
  return 0;
}

}  // namespace baton::cli
