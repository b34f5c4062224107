// What every `baton bench` subcommand parses and says the same way: its
// command line (Boost.Program_options errors and --help), an invalid value
// (named, with what was expected), the options of the checkpoint
// benchmarks, and how a benchmark that runs on every rank stops.
#pragma once

#include <mpi.h>

#include <boost/program_options.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "baton/checkpointer.h"
#include "baton/status.h"

namespace baton::cli {

// Parses args against desc. Returns 0 when parsed, 2 after an error said on
// stderr (with desc), -1 after --help said on stdout ("usage: USAGE" and
// desc). desc must hold "help,h".
int ParseBenchArgs(const std::string& cmd, const std::string& usage,
                   const boost::program_options::options_description& desc, const std::vector<std::string>& args,
                   boost::program_options::variables_map* vm);

// "CMD: OPTION: invalid value 'VALUE' (expected EXPECTED)" on stderr; returns 2.
int BadBenchValue(const std::string& cmd, const std::string& option, const std::string& value,
                  const std::string& expected);

// --bytes, --arrays, --reps, --dir and --json of `baton bench ckpt` and its
// --async and --level forms.
struct CkptBenchOptions {
  size_t bytes = 0;          // parsed from bytes_text by CheckCkptBenchOptions
  std::string bytes_text;    // as given, or the default
  int arrays = 8, reps = 5;
  std::string dir;           // $BATON_CKPT_DIR when not given
  bool json = false;
};
// Adds --bytes (default bytes_default) and --arrays; --reps, --dir and
// --json come with AddCkptBenchTail, so that each benchmark keeps its own
// options between them in its --help.
void AddCkptBenchHead(boost::program_options::options_description* desc, CkptBenchOptions* o,
                      const std::string& bytes_default);
void AddCkptBenchTail(boost::program_options::options_description* desc, CkptBenchOptions* o,
                      const std::string& reps_help, const std::string& dir_help);
// Checks them after parsing: bytes a byte count > 0, arrays and reps >= 1,
// a directory given or in $BATON_CKPT_DIR. Returns 0, or 2 after the error.
int CheckCkptBenchOptions(const std::string& cmd, CkptBenchOptions* o);

// Each rank's part of the benchmark's checkpoint: --arrays float arrays of
// rows of kBenchRowFloats (1 KiB), each rank `rows` rows of each (its part
// of --bytes, at least one row), random values from a seed per rank.
constexpr uint64_t kBenchRowFloats = 256;
struct BenchArrays {
  uint64_t rows = 0;   // per array and rank
  uint64_t total = 0;  // bytes over all ranks, as used (a multiple of the rows)
  std::vector<std::vector<float>> arrays;
};
BenchArrays MakeBenchArrays(const CkptBenchOptions& o, int ranks, int rank, unsigned seed);

// Ranks against cores: the most ranks on one node and the fewest cores
// (online CPUs) of a node. Measured at more ranks than cores, the ranks'
// hashing and copying compete with the I/O for the CPU and the figures are
// the CPU's, not the checkpoint's (docs/benchmarks.md, "Ranks and cores").
struct NodeLoad {
  int ranks_per_node = 1;
  int cores = 1;
  bool oversubscribed() const { return ranks_per_node > cores; }
};
// Collective over world. Each node whose ranks exceed its cores says so on
// stderr (its first rank), naming the node, the ranks and the cores.
NodeLoad CheckRanksPerNode(MPI_Comm world, const std::string& cmd);

// Each phase's slowest rank (MPI_MAX over world, element by element: every
// rank holds the same names in the same order); false when the reduction failed.
bool SlowestPhases(MPI_Comm world, const CheckpointStats& st, std::vector<CheckpointStats::Phase>* out);
// Each phase's median over repetitions (each repetition the same names).
std::vector<CheckpointStats::Phase> MedianPhases(const std::vector<std::vector<CheckpointStats::Phase>>& reps);

// The slowest rank's seconds (MPI_MAX over world); false when any rank
// failed, or the reduction itself did.
bool SlowestRank(MPI_Comm world, double seconds, bool failed, double* slowest);
// Says why a benchmark stops: this rank's error, or on rank 0 that another
// rank failed (its own message says why). Returns 1, the exit status.
int BenchFailed(const std::string& cmd, const std::string& mine, int rank);
inline int BenchFailed(const std::string& cmd, const Status& s, int rank) {
  return BenchFailed(cmd, s.ok() ? std::string() : s.ToString(), rank);
}

}  // namespace baton::cli
