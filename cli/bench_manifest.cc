// baton bench manifest: the manifest of a large job (by default 16,384
// ranks in shard groups of 8 with 64 arrays: 2,048 shards, about a million
// chunks), in both forms side by side:
//   single: format 2, one document with every chunk, written and parsed in
//     memory (what every rank received and parsed before format 3);
//   split: format 3, a top-level manifest plus one index per shard, written
//     to a temporary directory; then a restore's manifest work is measured
//     per simulated rank, each in a fresh child process of this binary
//     (--role-rank): rank 0 reads and parses the top-level manifest, every
//     rank parses the top-level manifest it is sent and loads the indexes
//     that hold its rows (ckpt/manifest_index.h), and reports the bytes it
//     read or received (counted as they are read) and the peak of its
//     resident memory above what it had before (VmHWM after clearing it,
//     minus VmRSS before, from /proc/self/status).
// Goals (issue 16): at most 1 MiB received and 16 MiB of peak memory per
// rank, and the restore's manifest agreement under 2 s.
#include <sys/stat.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "base/median.h"
#include "baton/version.h"
#include "ckpt/checksum.h"
#include "ckpt/layout.h"
#include "ckpt/fs/env.h"
#include "ckpt/manifest.h"
#include "ckpt/manifest_index.h"
#include "cli/commands.h"

namespace baton::cli {

namespace {

namespace po = boost::program_options;
using ckpt::Manifest;

// Every fourth array replicated (its rows spread over the ranks), the others
// sharded with rows_per_rank rows per rank: one chunk per rank and array.
Manifest BuildManifest(int ranks, int group_size, int arrays, uint64_t rows_per_rank) {
  Manifest m;
  m.format = ckpt::kSingleDocumentFormat;  // WriteSplit makes format 3 of it
  m.run_id = "bench-manifest";
  m.step = 123456;
  m.world_size = ranks;
  m.group_size = group_size;
  m.time = "2026-11-29T16:03:03Z";
  m.baton_version = kVersion;
  m.user_blob = std::string(4096, 'b');
  for (int a = 0; a < arrays; ++a) {
    ckpt::ArrayMeta am;
    am.name = "model.layers." + std::to_string(a) + ".weight";
    am.replicated = a % 4 == 3;
    am.dtype = am.replicated ? DType::kF32 : DType::kBF16;
    // Replicated: at least one row per rank, so that every rank writes a chunk of every array.
    am.shape = {am.replicated ? static_cast<uint64_t>(ranks) + 1000 : static_cast<uint64_t>(ranks) * rows_per_rank, 4096};
    m.arrays.push_back(am);
  }
  uint64_t salt = 0;
  for (int first = 0, g = 0; first < ranks; first += group_size, ++g) {
    ckpt::ShardMeta sh;
    sh.file = ckpt::CanonicalShardFile(static_cast<size_t>(g));  // as saves name it (a compact table, format 5)
    for (int r = first; r < std::min(ranks, first + group_size); ++r) sh.ranks.push_back(r);
    for (int a = 0; a < arrays; ++a) {
      const ckpt::ArrayMeta& am = m.arrays[static_cast<size_t>(a)];
      ckpt::DatasetMeta ds;
      ds.array = static_cast<uint32_t>(a);
      for (int r : sh.ranks) {
        ckpt::Chunk c;
        c.rank = r;
        if (am.replicated) {
          ckpt::ReplicatedRows(am.rows(), ranks, r, &c.first_row, &c.rows);
        } else {
          c.first_row = static_cast<uint64_t>(r) * rows_per_rank;
          c.rows = rows_per_rank;
        }
        if (c.rows == 0) continue;
        c.dataset_row = ds.rows;
        ++salt;
        c.xxh3 = ckpt::Xxh3(&salt, sizeof salt);  // full-width hex, as real checksums are
        ds.rows += c.rows;
        ds.chunks.push_back(c);
      }
      ds.offset = 4096 + sh.bytes;  // the datasets' data one after the other, after HDF5's metadata
      sh.bytes += ds.rows * am.row_bytes();
      sh.datasets.push_back(std::move(ds));
    }
    sh.bytes += 4096;
    m.shards.push_back(std::move(sh));
  }
  return m;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"); 0 if absent.
uint64_t StatusBytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) == 0) return std::strtoull(line.c_str() + key.size(), nullptr, 10) * 1024;
  }
  return 0;
}

// Counts the bytes read through ReadFile: what a rank reads or receives.
class CountingEnv : public ckpt::fs::EnvWrapper {
 public:
  using EnvWrapper::EnvWrapper;
  Status ReadFile(const std::string& path, uint64_t max_bytes, std::string* out) override {
    Status s = EnvWrapper::ReadFile(path, max_bytes, out);
    if (s.ok()) bytes += out->size();
    return s;
  }
  uint64_t bytes = 0;
};

// One simulated rank of a restore at `world` ranks from the version in
// `dir` (written at `ranks` ranks with rows_per_rank rows per rank and
// sharded array): its manifest work, measured in this (fresh) process.
int RoleRank(const std::string& dir, int rank, int world, int ranks, uint64_t rows_per_rank) {
  // Resets VmHWM to the current RSS (Linux >= 4.0), so the peak below is
  // this rank's manifest work only.
  { std::ofstream("/proc/self/clear_refs") << "5"; }
  const uint64_t rss0 = StatusBytes("VmRSS");
  CountingEnv env(ckpt::fs::Env::Default());
  const auto t0 = std::chrono::steady_clock::now();
  std::string text;
  Status s = env.ReadFile(dir + "/" + ckpt::kManifestName, ckpt::kMaxManifestBytes, &text);
  ckpt::Manifest m;
  if (s.ok()) s = ckpt::ParseManifestJson(text, &m);
  const double top_s = Seconds(t0);
  const uint64_t top_bytes = text.size();
  text.clear();
  text.shrink_to_fit();
  // The rows this rank restores: its even share of each sharded array (as
  // at save time when world == ranks), its share of each replicated one.
  std::vector<ckpt::RowRange> wants;
  const auto t1 = std::chrono::steady_clock::now();
  ckpt::IndexLoadStats loaded;
  size_t pieces = 0;
  if (s.ok()) {
    for (uint32_t a = 0; a < m.arrays.size(); ++a) {
      ckpt::RowRange w{a, 0, 0};
      if (m.arrays[a].replicated) {
        ckpt::ReplicatedRows(m.arrays[a].rows(), world, rank, &w.first_row, &w.rows);
      } else {
        const uint64_t total = static_cast<uint64_t>(ranks) * rows_per_rank;
        ckpt::ReplicatedRows(total, world, rank, &w.first_row, &w.rows);
      }
      wants.push_back(w);
    }
    s = ckpt::LoadShardIndexesFor(&env, dir, wants, ckpt::FirstShardFor(m, wants, rank, world), rank, &m, &loaded);
  }
  for (const ckpt::RowRange& w : wants) {
    std::vector<ckpt::ReadPiece> p;
    if (s.ok()) s = ckpt::PlanRead(m, w.array, w.first_row, w.rows, &p);
    pieces += p.size();
  }
  const double index_s = Seconds(t1);
  const uint64_t peak = StatusBytes("VmHWM");
  if (!s.ok()) {
    std::cerr << "baton bench manifest: rank " << rank << ": " << s << "\n";
    return 1;
  }
  nlohmann::ordered_json j;
  j["rank"] = rank;
  j["world"] = world;
  j["top_bytes"] = top_bytes;
  j["index_bytes"] = loaded.bytes_read;
  j["indexes"] = loaded.indexes_read;
  j["received_bytes"] = env.bytes;
  j["pieces"] = pieces;
  j["top_s"] = top_s;
  j["index_s"] = index_s;
  j["peak_bytes"] = peak > rss0 ? peak - rss0 : 0;
  std::cout << j.dump() << "\n";
  return 0;
}

// Runs RoleRank in a fresh process of this binary; its JSON line.
Status RunRole(const std::string& dir, int rank, int world, int ranks, uint64_t rows_per_rank, nlohmann::json* out) {
  const std::string cmd = "/proc/" + std::to_string(getpid()) + "/exe bench manifest --role-rank " +
                          std::to_string(rank) + " --restore-ranks " + std::to_string(world) + " --ranks " +
                          std::to_string(ranks) + " --rows-per-rank " + std::to_string(rows_per_rank) + " --dir '" +
                          dir + "'";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return Status::IOError("cli", "popen " + cmd);
  std::string line;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr) line += buf;
  const int rc = pclose(p);
  if (rc != 0) return Status::Internal("cli", cmd + ": exit status " + std::to_string(rc));
  *out = nlohmann::json::parse(line, nullptr, false);
  if (out->is_discarded()) return Status::Internal("cli", cmd + ": not JSON: " + line);
  return Status::OK();
}

// Format 3 into dir: every shard's index (as each group's first rank
// writes it), then the top-level manifest.
Status WriteSplit(ckpt::fs::Env* env, const std::string& dir, Manifest m, double* index_s, double* top_s,
                  uint64_t* index_bytes_max, uint64_t* top_bytes) {
  m.format = ckpt::kManifestFormat;
  auto t0 = std::chrono::steady_clock::now();
  *index_bytes_max = 0;
  for (size_t s = 0; s < m.shards.size(); ++s) {
    BATON_RETURN_IF_ERROR(ckpt::WriteShardIndex(env, dir, s, 0600, &m));
    *index_bytes_max = std::max(*index_bytes_max, m.shards[s].index_bytes);
  }
  *index_s = Seconds(t0);
  for (ckpt::ShardMeta& sh : m.shards) {
    sh.datasets.clear();
    sh.loaded = false;
  }
  t0 = std::chrono::steady_clock::now();
  std::string text;
  BATON_RETURN_IF_ERROR(ckpt::WriteTopManifestJson(m, &text));
  std::unique_ptr<ckpt::fs::WritableFile> f;
  BATON_RETURN_IF_ERROR(env->NewWritableFile(dir + "/" + ckpt::kManifestName, 0600, &f));
  BATON_RETURN_IF_ERROR(f->Append(text.data(), text.size()));
  BATON_RETURN_IF_ERROR(f->Close());
  *top_s = Seconds(t0);
  *top_bytes = text.size();
  return Status::OK();
}

}  // namespace

int BenchManifestCommand(const std::vector<std::string>& args) {
  int ranks = 16384, group_size = 8, arrays = 64, iters = 5, role_rank = -1, restore_ranks = 0;
  uint64_t rows_per_rank = 1024;
  std::string dir;
  bool json = false;
  po::options_description desc("baton bench manifest options");
  desc.add_options()
      ("help,h", "this text")
      ("ranks", po::value(&ranks), "world size, default 16384")
      ("group-size", po::value(&group_size), "ranks per shard file, default 8")
      ("arrays", po::value(&arrays), "arrays, default 64 (every fourth replicated)")
      ("rows-per-rank", po::value(&rows_per_rank), "rows of a sharded array per rank, default 1024")
      ("iters,n", po::value(&iters), "timed writes and parses of the single document, default 5")
      ("restore-ranks", po::value(&restore_ranks), "world size of the simulated restore, default --ranks (another size: a resharding restore)")
      ("json", po::bool_switch(&json), "one JSON object per line instead of the table")
      ("role-rank", po::value(&role_rank), "internal: measure one simulated rank of a restore from --dir in this process")
      ("dir", po::value(&dir), "internal: the directory of --role-rank");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "baton bench manifest: " << e.what() << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << "usage: baton bench manifest [OPTIONS]\n" << desc;
    return 0;
  }
  if (restore_ranks == 0) restore_ranks = ranks;
  if (ranks < 1 || group_size < 1 || arrays < 0 || iters < 1 || rows_per_rank < 1 || restore_ranks < 1) {
    std::cerr << "baton bench manifest: --ranks " << ranks << ", --group-size " << group_size << ", --arrays " << arrays
              << ", --rows-per-rank " << rows_per_rank << ", --iters " << iters << ", --restore-ranks " << restore_ranks
              << ": ranks, group size, rows per rank, iterations and restore ranks must be at least 1, arrays at least 0\n";
    return 2;
  }
  if (role_rank >= 0) {
    if (dir.empty() || role_rank >= restore_ranks) {
      std::cerr << "baton bench manifest: --role-rank " << role_rank << " needs --dir and a rank below --restore-ranks "
                << restore_ranks << "\n";
      return 2;
    }
    return RoleRank(dir, role_rank, restore_ranks, ranks, rows_per_rank);
  }

  const Manifest m = BuildManifest(ranks, group_size, arrays, rows_per_rank);
  size_t chunks = 0;
  for (const auto& sh : m.shards) {
    for (const auto& ds : sh.datasets) chunks += ds.chunks.size();
  }
  // The single document (format 2), in memory.
  std::vector<double> write_s, parse_s;
  std::string text;
  uint64_t single_peak = 0;
  for (int i = 0; i < iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    Status s = ckpt::WriteManifestJson(m, &text);
    write_s.push_back(Seconds(t0));
    if (!s.ok()) {
      std::cerr << "baton bench manifest: " << s << "\n";
      return 1;
    }
    Manifest back;
    { std::ofstream("/proc/self/clear_refs") << "5"; }
    const uint64_t rss0 = StatusBytes("VmRSS");
    t0 = std::chrono::steady_clock::now();
    s = ckpt::ParseManifestJson(text, &back);
    parse_s.push_back(Seconds(t0));
    const uint64_t hwm = StatusBytes("VmHWM");
    single_peak = std::max(single_peak, hwm > rss0 ? hwm - rss0 : 0);
    if (!s.ok()) {
      std::cerr << "baton bench manifest: " << s << "\n";
      return 1;
    }
    if (json) {
      nlohmann::ordered_json j;
      j["bench"] = "manifest";
      j["iter"] = i;
      j["write_s"] = write_s.back();
      j["parse_s"] = parse_s.back();
      std::cout << j.dump() << "\n";
    }
  }
  const double w = Median(write_s), p = Median(parse_s);
  const size_t single_bytes = text.size();
  text.clear();
  text.shrink_to_fit();

  // The split form (format 3), on disk, and the simulated ranks.
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp") + "/baton-bench-manifest.XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::cerr << "baton bench manifest: mkdtemp " << tmpl << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  dir = tmpl;
  ckpt::fs::Env* env = ckpt::fs::Env::Default();
  double index_write_s = 0, top_write_s = 0;
  uint64_t index_bytes_max = 0, top_bytes = 0;
  Status s = WriteSplit(env, dir, m, &index_write_s, &top_write_s, &index_bytes_max, &top_bytes);
  // Sampled ranks: the first (it also reads the manifest), its neighbour, one
  // in the middle, the last.
  std::vector<int> sample = {0, 1, restore_ranks / 2, restore_ranks - 1};
  sample.erase(std::unique(sample.begin(), sample.end()), sample.end());
  std::vector<nlohmann::json> roles;
  for (int r : sample) {
    if (!s.ok()) break;
    nlohmann::json j;
    s = RunRole(dir, r, restore_ranks, ranks, rows_per_rank, &j);
    roles.push_back(j);
  }
  Status rm = env->RemoveTree(dir);
  if (!s.ok() || !rm.ok()) {
    std::cerr << "baton bench manifest: " << (s.ok() ? rm : s) << " (" << dir << ")\n";
    return 1;
  }
  uint64_t max_received = 0, max_peak = 0;
  double rank0_top_s = 0, max_rank_s = 0;
  for (const nlohmann::json& j : roles) {
    max_received = std::max(max_received, j["received_bytes"].get<uint64_t>());
    max_peak = std::max(max_peak, j["peak_bytes"].get<uint64_t>());
    if (j["rank"].get<int>() == 0) rank0_top_s = j["top_s"].get<double>();
    max_rank_s = std::max(max_rank_s, j["top_s"].get<double>() + j["index_s"].get<double>());
  }
  // Rank 0 reads and parses the top-level manifest, then every rank parses
  // what it is sent and loads its indexes (the broadcast's network time is
  // not in this figure: no MPI here).
  const double agreement_s = rank0_top_s + max_rank_s;
  if (json) {
    for (const nlohmann::json& j : roles) {
      nlohmann::ordered_json o;
      o["bench"] = "manifest";
      o["role"] = j;
      std::cout << o.dump() << "\n";
    }
    nlohmann::ordered_json j;
    j["bench"] = "manifest";
    j["ranks"] = ranks;
    j["group_size"] = group_size;
    j["arrays"] = arrays;
    j["shards"] = m.shards.size();
    j["chunks"] = chunks;
    j["json_bytes"] = single_bytes;
    j["iters"] = iters;
    j["write_s_median"] = w;
    j["parse_s_median"] = p;
    j["total_s_median"] = w + p;
    j["single_parse_peak_bytes"] = single_peak;
    j["restore_ranks"] = restore_ranks;
    j["top_bytes"] = top_bytes;
    j["index_bytes_max"] = index_bytes_max;
    j["index_write_s_all"] = index_write_s;
    j["top_write_s"] = top_write_s;
    j["max_received_bytes"] = max_received;
    j["max_peak_bytes"] = max_peak;
    j["agreement_s"] = agreement_s;
    std::cout << j.dump() << "\n";
  } else {
    std::printf("# baton bench manifest: %d ranks in groups of %d, %d arrays: %zu shards, %zu chunks\n", ranks,
                group_size, arrays, m.shards.size(), chunks);
    std::printf("# single document (format 2, what every rank received and parsed before format 3): %zu bytes, "
                "median of %d\n%12s %12s %12s %16s\n%12.3f %12.3f %12.3f %16llu\n",
                single_bytes, iters, "write_s", "parse_s", "total_s", "parse_peak_B", w, p, w + p,
                static_cast<unsigned long long>(single_peak));
    std::printf("# split (format 3): top-level manifest %llu bytes, %zu indexes of at most %llu bytes, written in "
                "%.3f s (all indexes, one process) + %.3f s (top)\n",
                static_cast<unsigned long long>(top_bytes), m.shards.size(),
                static_cast<unsigned long long>(index_bytes_max), index_write_s, top_write_s);
    std::printf("# restore at %d ranks, simulated ranks each in a fresh process (received: counted as read; peak: VmHWM - VmRSS before)\n",
                restore_ranks);
    std::printf("%8s %14s %8s %12s %10s %10s\n", "rank", "received_B", "indexes", "peak_B", "top_s", "index_s");
    for (const nlohmann::json& j : roles) {
      std::printf("%8d %14llu %8d %12llu %10.4f %10.4f\n", j["rank"].get<int>(),
                  static_cast<unsigned long long>(j["received_bytes"].get<uint64_t>()), j["indexes"].get<int>(),
                  static_cast<unsigned long long>(j["peak_bytes"].get<uint64_t>()), j["top_s"].get<double>(),
                  j["index_s"].get<double>());
    }
    std::printf("# per rank at most %llu bytes received (goal 1 MiB), %llu bytes peak (goal 16 MiB); agreement %.3f s "
                "(rank 0's read and parse + the slowest rank's; goal 2 s; the broadcast's network time not included)\n",
                static_cast<unsigned long long>(max_received), static_cast<unsigned long long>(max_peak), agreement_s);
  }
  return 0;
}

}  // namespace baton::cli
