// baton bench KIND: one benchmark per file, all measured side by side with
// the raw operation they stand for (see docs/benchmarks.md).
#include <stdlib.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace baton::cli {

int BenchCommand(const std::vector<std::string>& args) {
  const std::string kind = args.empty() ? "" : args[0];
  const std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
  // A benchmark's checkpoints are scratch, removed at its end: no event log
  // (docs/events.md) beside them, which would outlive them and add its own
  // writes to what is measured.
  setenv("BATON_EVENTS", "0", 1);
  if (kind == "collectives") return BenchCollectivesCommand(rest);
  if (kind == "ckpt") {
    // --async: SaveAsync's own benchmark (bench_ckpt_async.cc); --level:
    // restore from level 2 beside level 3 (bench_ckpt_level.cc); --reshard:
    // the bytes a restore at another size reads (bench_ckpt_reshard.cc).
    std::vector<std::string> opts = rest;
    for (const std::string& o : opts) {
      if (o == "--level" || o.rfind("--level=", 0) == 0) return BenchCkptLevelCommand(opts);
      if (o == "--reshard" || o.rfind("--reshard=", 0) == 0) return BenchCkptReshardCommand(opts);
    }
    auto async = std::find(opts.begin(), opts.end(), "--async");
    if (async == opts.end()) return BenchCkptCommand(rest);
    opts.erase(async);
    return BenchCkptAsyncCommand(opts);
  }
  if (kind == "manifest") return BenchManifestCommand(rest);
  std::cerr << (kind.empty() ? "baton bench: which benchmark?\n" : "baton bench: unknown benchmark '" + kind + "'\n")
            << "usage: baton bench collectives|ckpt|manifest [OPTIONS]   (--help after the name lists the options)\n";
  return 2;
}

}  // namespace baton::cli
