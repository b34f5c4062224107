#include "cli/bench_options.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <random>

#include "base/median.h"
#include "cli/byte_size.h"

namespace baton::cli {

namespace po = boost::program_options;

int ParseBenchArgs(const std::string& cmd, const std::string& usage, const po::options_description& desc,
                   const std::vector<std::string>& args, po::variables_map* vm) {
  try {
    po::store(po::command_line_parser(args).options(desc).run(), *vm);
    po::notify(*vm);
  } catch (const po::error& e) {
    std::cerr << cmd << ": " << e.what() << "\n" << desc;
    return 2;
  }
  if (vm->count("help")) {
    std::cout << "usage: " << usage << "\n" << desc;
    return -1;
  }
  return 0;
}

int BadBenchValue(const std::string& cmd, const std::string& option, const std::string& value,
                  const std::string& expected) {
  std::cerr << cmd << ": " << option << ": invalid value '" << value << "' (expected " << expected << ")\n";
  return 2;
}

void AddCkptBenchHead(po::options_description* desc, CkptBenchOptions* o, const std::string& bytes_default) {
  o->bytes_text = bytes_default;
  desc->add_options()
      ("bytes", po::value(&o->bytes_text), ("total bytes over all ranks (K/M/G suffixes), default " + bytes_default).c_str())
      ("arrays", po::value(&o->arrays), "sharded arrays the bytes are split into, default 8");
}

void AddCkptBenchTail(po::options_description* desc, CkptBenchOptions* o, const std::string& reps_help,
                      const std::string& dir_help) {
  desc->add_options()
      ("reps", po::value(&o->reps), reps_help.c_str())
      ("dir", po::value(&o->dir), dir_help.c_str())
      ("json", po::bool_switch(&o->json), "one JSON object per line");
}

int CheckCkptBenchOptions(const std::string& cmd, CkptBenchOptions* o) {
  if (!ParseBytes(o->bytes_text, &o->bytes) || o->bytes == 0)
    return BadBenchValue(cmd, "--bytes", o->bytes_text, "a byte count such as 64M, 4G");
  if (o->arrays < 1) return BadBenchValue(cmd, "--arrays", std::to_string(o->arrays), "an integer >= 1");
  if (o->reps < 1) return BadBenchValue(cmd, "--reps", std::to_string(o->reps), "an integer >= 1");
  if (o->dir.empty()) {
    const char* env = std::getenv("BATON_CKPT_DIR");
    if (env == nullptr || *env == '\0') {
      std::cerr << cmd << ": no directory: give --dir or set BATON_CKPT_DIR\n";
      return 2;
    }
    o->dir = env;
  }
  return 0;
}

BenchArrays MakeBenchArrays(const CkptBenchOptions& o, int ranks, int rank, unsigned seed) {
  BenchArrays b;
  const uint64_t per_rank = o.bytes / static_cast<uint64_t>(ranks);
  b.rows = std::max<uint64_t>(1, per_rank / static_cast<uint64_t>(o.arrays) / (kBenchRowFloats * 4));
  b.total = b.rows * kBenchRowFloats * 4 * static_cast<uint64_t>(o.arrays) * static_cast<uint64_t>(ranks);
  b.arrays.resize(static_cast<size_t>(o.arrays));
  std::mt19937 gen(seed + static_cast<unsigned>(rank));
  std::uniform_real_distribution<float> dist(-1, 1);
  for (auto& a : b.arrays) {
    a.resize(b.rows * kBenchRowFloats);
    for (float& x : a) x = dist(gen);
  }
  return b;
}

NodeLoad CheckRanksPerNode(MPI_Comm world, const std::string& cmd) {
  NodeLoad load;
  MPI_Comm node = MPI_COMM_NULL;
  int local = 1, local_rank = 0;
  if (MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_size(node, &local);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_free(&node);
  }
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const int cores = online > 0 ? static_cast<int>(online) : 1;
  if (local_rank == 0 && local > cores) {
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    std::cerr << cmd << ": warning: " << local << " ranks on " << host << " share its " << cores
              << " core(s): the ranks' hashing and copying compete with the I/O for the CPU, so the figures "
                 "are of an oversubscribed node (measure at ranks <= cores; docs/benchmarks.md, \"Ranks and "
                 "cores\")\n";
  }
  int in[2] = {local, -cores}, out[2] = {local, -cores};
  MPI_Allreduce(in, out, 2, MPI_INT, MPI_MAX, world);
  load.ranks_per_node = out[0];
  load.cores = -out[1];
  return load;
}

bool SlowestPhases(MPI_Comm world, const CheckpointStats& st, std::vector<CheckpointStats::Phase>* out) {
  std::vector<double> in, max(st.phases.size());
  for (const CheckpointStats::Phase& p : st.phases) in.push_back(p.seconds);
  if (MPI_Allreduce(in.data(), max.data(), static_cast<int>(in.size()), MPI_DOUBLE, MPI_MAX, world) != MPI_SUCCESS)
    return false;
  *out = st.phases;
  for (size_t i = 0; i < out->size(); ++i) (*out)[i].seconds = max[i];
  return true;
}

std::vector<CheckpointStats::Phase> MedianPhases(const std::vector<std::vector<CheckpointStats::Phase>>& reps) {
  std::vector<CheckpointStats::Phase> out;
  if (reps.empty()) return out;
  out = reps.front();
  for (size_t i = 0; i < out.size(); ++i) {
    std::vector<double> v;
    for (const auto& r : reps) v.push_back(r[i].seconds);
    out[i].seconds = Median(v);
  }
  return out;
}

bool SlowestRank(MPI_Comm world, double seconds, bool failed, double* slowest) {
  double in[2] = {seconds, failed ? 1.0 : 0.0}, out[2] = {0, 1};
  if (MPI_Allreduce(in, out, 2, MPI_DOUBLE, MPI_MAX, world) != MPI_SUCCESS) return false;
  *slowest = out[0];
  return out[1] == 0;
}

int BenchFailed(const std::string& cmd, const std::string& mine, int rank) {
  if (!mine.empty())
    std::cerr << cmd << ": rank " << rank << ": " << mine << "\n";
  else if (rank == 0)
    std::cerr << cmd << ": stopped: another rank failed (see its message)\n";
  return 1;
}

}  // namespace baton::cli
