// baton bench manifest: the time to write and to parse the manifest of a
// large job (by default 16,384 ranks in shard groups of 8 with 64 arrays:
// 2,048 shards, about a million chunks). The goal: under 2 s for
// both. No MPI, no files: the JSON stays in memory.
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "base/median.h"
#include "baton/version.h"
#include "ckpt/checksum.h"
#include "ckpt/layout.h"
#include "ckpt/manifest.h"
#include "cli/commands.h"

namespace baton::cli {

namespace {

namespace po = boost::program_options;
using ckpt::Manifest;

// Every fourth array replicated (its rows spread over the ranks), the others
// sharded with rows_per_rank rows per rank: one chunk per rank and array.
Manifest BuildManifest(int ranks, int group_size, int arrays, uint64_t rows_per_rank) {
  Manifest m;
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
    char file[32];
    std::snprintf(file, sizeof file, "shard-%05d.h5", g);
    sh.file = file;
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
      sh.bytes += ds.rows * am.row_bytes();
      sh.datasets.push_back(std::move(ds));
    }
    m.shards.push_back(std::move(sh));
  }
  return m;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

int BenchManifestCommand(const std::vector<std::string>& args) {
  int ranks = 16384, group_size = 8, arrays = 64, iters = 5;
  uint64_t rows_per_rank = 1024;
  bool json = false;
  po::options_description desc("baton bench manifest options");
  desc.add_options()
      ("help,h", "this text")
      ("ranks", po::value(&ranks), "world size, default 16384")
      ("group-size", po::value(&group_size), "ranks per shard file, default 8")
      ("arrays", po::value(&arrays), "arrays, default 64 (every fourth replicated)")
      ("rows-per-rank", po::value(&rows_per_rank), "rows of a sharded array per rank, default 1024")
      ("iters,n", po::value(&iters), "timed writes and parses, default 5")
      ("json", po::bool_switch(&json), "one JSON object per line instead of the table");
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
  if (ranks < 1 || group_size < 1 || arrays < 0 || iters < 1 || rows_per_rank < 1) {
    std::cerr << "baton bench manifest: --ranks " << ranks << ", --group-size " << group_size << ", --arrays " << arrays
              << ", --rows-per-rank " << rows_per_rank << ", --iters " << iters
              << ": ranks, group size, rows per rank and iterations must be at least 1, arrays at least 0\n";
    return 2;
  }

  const Manifest m = BuildManifest(ranks, group_size, arrays, rows_per_rank);
  size_t chunks = 0;
  for (const auto& sh : m.shards) {
    for (const auto& ds : sh.datasets) chunks += ds.chunks.size();
  }
  std::vector<double> write_s, parse_s;
  std::string text;
  for (int i = 0; i < iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    Status s = ckpt::WriteManifestJson(m, &text);
    write_s.push_back(Seconds(t0));
    if (!s.ok()) {
      std::cerr << "baton bench manifest: " << s << "\n";
      return 1;
    }
    Manifest back;
    t0 = std::chrono::steady_clock::now();
    s = ckpt::ParseManifestJson(text, &back);
    parse_s.push_back(Seconds(t0));
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
  if (json) {
    nlohmann::ordered_json j;
    j["bench"] = "manifest";
    j["ranks"] = ranks;
    j["group_size"] = group_size;
    j["arrays"] = arrays;
    j["shards"] = m.shards.size();
    j["chunks"] = chunks;
    j["json_bytes"] = text.size();
    j["iters"] = iters;
    j["write_s_median"] = w;
    j["parse_s_median"] = p;
    j["total_s_median"] = w + p;
    std::cout << j.dump() << "\n";
  } else {
    std::printf("# baton bench manifest: %d ranks in groups of %d, %d arrays: %zu shards, %zu chunks, %zu bytes of JSON\n",
                ranks, group_size, arrays, m.shards.size(), chunks, text.size());
    std::printf("# median of %d\n%12s %12s %12s\n%12.3f %12.3f %12.3f\n", iters, "write_s", "parse_s", "total_s", w, p, w + p);
  }
  return 0;
}

}  // namespace baton::cli
