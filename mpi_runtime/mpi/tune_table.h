// The tuning table behind Algorithm::kAuto of the mpi backend: for a job
// shape (ranks, nodes, ranks per node), the fastest all-reduce algorithm
// from each measured message size on. `baton bench collectives --tune`
// measures and writes it; every MpiCommunicator loads it once at creation.
//
// File format (JSON):
//   {"version": 1,
//    "entries": [{"ranks": 8, "nodes": 4, "ranks_per_node": 2,
//                 "sizes": [{"bytes": 8, "algo": "native"},
//                           {"bytes": 65536, "algo": "ring"}, ...]}, ...]}
//
// Without a table (or for a shape it does not list) auto is native: Open
// MPI's own all-reduce already picks its algorithm by message size and
// communicator size (coll/tuned decision rules, coll/han on multi-node
// jobs), so native is the best guess nobody measured.
//
// Everything here is pure except ReadTuneFile and LoadTuneTable (the file
// system); the MPI broadcast is the caller's, so this file needs no MPI
// library and is unit-tested alone (tests/unit/tune_table_test.cc).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <tuple>

#include "baton/status.h"
#include "baton/topology.h"

namespace baton::mpi {

// The three algorithms the table may name; the same values as
// baton::Algorithm's kNative, kHierarchical, kRing (kept apart from
// communicator.h so that this file needs no MPI header).
enum class TunedAlgo { kNative, kHierarchical, kRing };
std::string_view TunedAlgoName(TunedAlgo a);
Status ParseTunedAlgo(std::string_view text, TunedAlgo* a);

struct TuneKey {
  int ranks = 0, nodes = 0;
  int ranks_per_node = 0;  // 0 when the nodes hold different numbers of ranks
  bool operator<(const TuneKey& o) const {
    return std::tie(ranks, nodes, ranks_per_node) < std::tie(o.ranks, o.nodes, o.ranks_per_node);
  }
  bool operator==(const TuneKey& o) const {
    return ranks == o.ranks && nodes == o.nodes && ranks_per_node == o.ranks_per_node;
  }
};

TuneKey KeyOf(const Topology& topology);

// Per job shape: message size in bytes -> fastest algorithm from that size on.
using TuneTable = std::map<TuneKey, std::map<size_t, TunedAlgo>>;

// Parses the JSON text of a table. `source` (the file name) goes into the
// error, with what is wrong and where (entry index, field).
Status ParseTuneTable(std::string_view text, const std::string& source, TuneTable* table);

// The table as JSON text (the format above), one line per job shape.
std::string FormatTuneTable(const TuneTable& table);

// The algorithm for `bytes` under `key`: the entry of the largest measured
// size at or below `bytes` (the smallest measured size below all of them);
// native when the table has no such key.
TunedAlgo LookupTuned(const TuneTable& table, const TuneKey& key, size_t bytes);

// The algorithm --tune records for one size from the median times of the
// three (microseconds): the fastest, but native unless another beats it by
// more than `margin` (0.05: 5 %). Native is Open MPI's own, tuned choice;
// an alternative that wins by less than the run-to-run noise of a shared
// machine is as likely to lose at run time, and native within 5 % of the
// best keeps auto within 0.95 of it.
inline constexpr double kTuneMargin = 0.05;
TunedAlgo PickTuned(double native_us, double hierarchical_us, double ring_us, double margin = kTuneMargin);

// $BATON_TUNE_FILE, else $XDG_CACHE_HOME/baton/tune.json, else
// $HOME/.cache/baton/tune.json; empty when none of them is set.
std::string DefaultTunePath();

// Reads a whole file. A missing file sets *exists = false and is OK (no
// table is the normal case); any other failure is an IOError naming it.
Status ReadTuneFile(const std::string& path, std::string* content, bool* exists);

// Writes the file (creating its directory) through a temporary file and a
// rename, so a concurrent reader never sees half a table.
Status WriteTuneFile(const std::string& path, const std::string& content);

// Loads the table every rank will use. `is_root`: this rank reads the file.
// `share` makes the root's text every rank's (an MPI_Bcast in the mpi
// backend; identity in tests), so that all ranks decide alike even when
// only some can read the file. A bad table gives an empty *table and the
// Status naming the file and the problem (the caller warns and carries on
// with native).
Status LoadTuneTable(const std::string& path, bool is_root, const std::function<Status(std::string*)>& share,
                     TuneTable* table);

}  // namespace baton::mpi
