// baton ckpt ls|inspect|verify|gc: the checkpoint directory seen from a
// login node. MPI is never initialized here; the shards are read with
// HDF5's serial driver (ckpt/verify.h) and the rest is the MPI-free
// catalog and manifest code that the Checkpointer itself uses, so the tool
// and a restore never disagree about what a version is.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "baton/status.h"
#include "ckpt/catalog.h"
#include "ckpt/fs/env.h"
#include "ckpt/manifest.h"
#include "ckpt/manifest_index.h"
#include "ckpt/run.h"
#include "ckpt/verify.h"
#include "cli/commands.h"

namespace baton::cli {
namespace {

namespace po = boost::program_options;
namespace fs = ::baton::ckpt::fs;

constexpr const char* kUsage =
    "usage: baton ckpt ls      [DIR] [--local-dir L] [--json]\n"
    "       baton ckpt inspect [DIR] [--step N] [--json]\n"
    "       baton ckpt verify  [DIR] [--step N] [--no-progress]\n"
    "       baton ckpt gc      [DIR] --keep K [--dry-run]\n"
    "DIR defaults to $BATON_CKPT_DIR. See baton(1).\n";


struct Common {
  std::string dir;
  std::optional<int64_t> step;
  bool json = false;
  int max_failures = 2;
};

// Text from a checkpoint directory (a manifest's time, names, error
// messages quoting them) is untrusted: printed with every byte outside
// printable ASCII, and the backslash, as \xNN, so that terminal escape
// codes never reach the screen and a newline cannot forge an ls row.
std::string Printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  return out;
}

// JSON of untrusted text: invalid UTF-8 replaced, control characters
// escaped (nlohmann's dump does that for \u0000-\u001f).
std::string JsonDump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

int Usage(const std::string& why) {
  if (!why.empty()) std::cerr << "baton ckpt: " << why << "\n";
  std::cerr << kUsage;
  return 2;
}

int Fail(const char* sub, const Status& s) {
  std::cerr << "baton ckpt " << sub << ": " << Printable(s.ToString()) << "\n";
  return 1;
}

// The directory as given may be a symlink (a scratch link): resolved once
// here, so every later call sees the real directory and none follows a
// symlink inside it (they all open with O_NOFOLLOW).
Status ResolveDir(std::string* dir) {
  char* real = ::realpath(dir->c_str(), nullptr);
  if (real == nullptr) {
    const int err = errno;
    return (err == ENOENT ? Status::NotFound("cli", *dir + ": no such directory")
                          : Status::IOError("cli", *dir + ": " + std::strerror(err)));
  }
  *dir = real;
  std::free(real);
  return Status::OK();
}

// The options every subcommand shares, plus `extra`. Returns 0 to go on,
// else the exit status.
int ParseCommon(const char* sub, const std::vector<std::string>& args, po::options_description extra,
                Common* c, po::variables_map* vm) {
  po::options_description desc(std::string("baton ckpt ") + sub + " options");
  int64_t step = -1;
  desc.add_options()("help,h", "print this help")(
      "dir", po::value(&c->dir), "checkpoint directory (default: $BATON_CKPT_DIR)")(
      "step", po::value(&step), "the newest version of this step (default: the newest complete version)")(
      "json", po::bool_switch(&c->json), "print JSON")(
      "max-restore-failures", po::value(&c->max_failures)->default_value(2),
      "failed restores after which a version counts as quarantined");
  desc.add(extra);
  po::positional_options_description pos;
  pos.add("dir", 1);
  try {
    po::store(po::command_line_parser(args).options(desc).positional(pos).run(), *vm);
    po::notify(*vm);
  } catch (const po::error& e) {
    std::cerr << "baton ckpt " << sub << ": " << e.what() << "\n" << desc;
    return 2;
  }
  if (vm->count("help")) {
    std::cout << kUsage << desc;
    return -1;
  }
  if (vm->count("step")) {
    if (step < 0) return Usage("--step: invalid value '" + std::to_string(step) + "' (expected a step >= 0)");
    c->step = step;
  }
  if (c->max_failures < 1)
    return Usage("--max-restore-failures: invalid value '" + std::to_string(c->max_failures) + "' (expected >= 1)");
  if (c->dir.empty()) {
    const char* env = std::getenv("BATON_CKPT_DIR");
    if (env == nullptr || *env == '\0')
      return Usage("no checkpoint directory: give DIR or set BATON_CKPT_DIR");
    c->dir = env;
  }
  if (Status s = ResolveDir(&c->dir); !s.ok()) return Fail(sub, s);
  return 0;
}

// The top-level manifest; with `whole`, every shard's index too (format 3),
// checked across shards.
Status LoadManifest(fs::Env* env, const ckpt::VersionInfo& v, ckpt::Manifest* m, bool whole) {
  std::string text;
  BATON_RETURN_IF_ERROR(env->ReadFile(v.path + "/" + ckpt::kManifestName, ckpt::kMaxManifestBytes, &text));
  uint64_t max_values = 0;
  BATON_RETURN_IF_ERROR(ckpt::ManifestValueLimit(env, v.path, text.size(), &max_values));
  BATON_RETURN_IF_ERROR(ckpt::ParseManifestJson(text, m, max_values).Annotate(v.path + "/" + ckpt::kManifestName));
  return whole ? ckpt::LoadAllShardIndexes(env, v.path, m) : Status::OK();
}

// The newest complete (or quarantined) version, of `step` if given.
Status PickVersion(const std::vector<ckpt::VersionInfo>& versions, const Common& c, ckpt::VersionInfo* out) {
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
    if (it->status == ckpt::VersionStatus::kIncomplete) continue;
    if (c.step && it->step != *c.step) continue;
    *out = *it;
    return Status::OK();
  }
  return Status::NotFound("cli", c.step ? "no committed version of step " + std::to_string(*c.step) + " in " + c.dir
                                        : "no committed version in " + c.dir);
}

// Level 2 as this node sees it: the complete versions in
// <local_dir>/<run id of DIR>/ (ckpt/node_local_level.h), by name. Other
// nodes' local disks are not visible from here; a missing directory is
// an empty level 2.
Status LocalVersions(fs::Env* env, const std::string& dir, const std::string& local_dir,
                     std::vector<ckpt::VersionInfo>* out, std::string* root) {
  out->clear();
  ckpt::RunInfo run;
  Status s = ckpt::ReadRun(env, dir, &run);
  if (s.code() == Code::kNotFound) return Status::OK();
  BATON_RETURN_IF_ERROR(s);
  *root = local_dir + "/" + run.run_id;
  fs::FileInfo info;
  if (env->Stat(*root, &info).code() == Code::kNotFound) return Status::OK();
  std::vector<ckpt::VersionInfo> all;
  BATON_RETURN_IF_ERROR(ckpt::ListVersions(env, *root, 1 << 30, &all));
  for (const ckpt::VersionInfo& v : all) {
    if (v.status == ckpt::VersionStatus::kComplete) out->push_back(v);
  }
  return Status::OK();
}

int Ls(const std::vector<std::string>& args) {
  Common c;
  po::variables_map vm;
  std::string local_dir;
  po::options_description extra;
  extra.add_options()("local-dir", po::value(&local_dir),
                      "node-local directory of level 2, as seen on this node (default: $BATON_LOCAL_DIR)");
  if (int rc = ParseCommon("ls", args, extra, &c, &vm); rc != 0) return rc < 0 ? 0 : rc;
  if (local_dir.empty()) {
    const char* env = std::getenv("BATON_LOCAL_DIR");
    if (env != nullptr) local_dir = env;
  }
  fs::Env* env = fs::Env::Default();
  std::vector<ckpt::VersionInfo> versions;
  if (Status s = ckpt::ListVersions(env, c.dir, c.max_failures, &versions); !s.ok()) return Fail("ls", s);
  // Level 2 on this node: versions only there are listed from there.
  std::vector<ckpt::VersionInfo> local;
  std::string local_root;
  if (!local_dir.empty()) {
    if (Status s = LocalVersions(env, c.dir, local_dir, &local, &local_root); !s.ok()) return Fail("ls", s);
  }
  std::vector<bool> shared(versions.size(), true);
  std::vector<bool> node_local(versions.size(), false);
  for (const ckpt::VersionInfo& l : local) {
    bool found = false;
    for (size_t i = 0; i < versions.size(); ++i) {
      if (versions[i].name == l.name) node_local[i] = found = true;
    }
    if (!found) {
      versions.push_back(l);
      shared.push_back(false);
      node_local.push_back(true);
    }
  }
  std::vector<size_t> order(versions.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return versions[a].seq < versions[b].seq; });
  nlohmann::json list = nlohmann::json::array();
  if (!c.json) std::printf("%10s  %-11s  %-20s  %6s  %14s  %-17s  %s\n", "STEP", "STATUS", "TIME", "WORLD", "BYTES",
                           "LEVELS", "PATH");
  for (size_t i : order) {
    const ckpt::VersionInfo& v = versions[i];
    nlohmann::json levels = nlohmann::json::array();
    std::string level_text;
    if (node_local[i]) levels.push_back("node-local"), level_text = "node-local";
    if (shared[i]) levels.push_back("shared"), level_text += level_text.empty() ? "shared" : ",shared";
    ckpt::Manifest m;
    Status s;
    if (v.status != ckpt::VersionStatus::kIncomplete) s = LoadManifest(env, v, &m, /*whole=*/false);
    const bool have = v.status != ckpt::VersionStatus::kIncomplete && s.ok();
    nlohmann::json o = {{"step", v.step},
                        {"path", v.path},
                        {"seq", v.seq},
                        {"status", std::string(ckpt::VersionStatusName(v.status))},
                        {"time", have ? nlohmann::json(m.time) : nlohmann::json(nullptr)},
                        {"world_size", have ? nlohmann::json(m.world_size) : nlohmann::json(nullptr)},
                        {"bytes", have ? nlohmann::json(m.total_bytes()) : nlohmann::json(nullptr)},
                        {"levels", levels},
                        {"restore_failures", v.restore_failures}};
    if (!s.ok()) o["error"] = s.ToString();
    if (!v.problem.empty()) o["problem"] = v.problem;
    if (c.json) {
      list.push_back(o);
      continue;
    }
    std::string note = s.ok() ? "" : "  (" + s.message() + ")";
    if (!v.problem.empty()) note += "  (" + v.problem + ")";
    std::printf("%10lld  %-11s  %-20s  %6s  %14s  %-17s  %s%s\n", static_cast<long long>(v.step),
                std::string(ckpt::VersionStatusName(v.status)).c_str(), have ? Printable(m.time).c_str() : "-",
                have ? std::to_string(m.world_size).c_str() : "-", have ? std::to_string(m.total_bytes()).c_str() : "-",
                level_text.c_str(), Printable(v.path).c_str(), Printable(note).c_str());
  }
  if (c.json) std::cout << JsonDump(list) << "\n";
  return 0;
}

int Inspect(const std::vector<std::string>& args) {
  Common c;
  po::variables_map vm;
  if (int rc = ParseCommon("inspect", args, po::options_description(), &c, &vm); rc != 0) return rc < 0 ? 0 : rc;
  fs::Env* env = fs::Env::Default();
  std::vector<ckpt::VersionInfo> versions;
  ckpt::VersionInfo v;
  ckpt::Manifest m;
  if (Status s = ckpt::ListVersions(env, c.dir, c.max_failures, &versions); !s.ok()) return Fail("inspect", s);
  if (Status s = PickVersion(versions, c, &v); !s.ok()) return Fail("inspect", s);
  if (Status s = LoadManifest(env, v, &m, /*whole=*/true); !s.ok()) return Fail("inspect", s);
  if (c.json) {
    nlohmann::json o = {{"step", m.step},        {"path", v.path},        {"run_id", m.run_id},
                        {"time", m.time},        {"world_size", m.world_size},
                        {"group_size", m.group_size}, {"baton_version", m.baton_version},
                        {"bytes", m.total_bytes()}, {"user_blob_bytes", m.user_blob.size()},
                        {"status", std::string(ckpt::VersionStatusName(v.status))}};
    o["arrays"] = nlohmann::json::array();
    for (const ckpt::ArrayMeta& a : m.arrays)
      o["arrays"].push_back({{"name", a.name},
                             {"dtype", std::string(DTypeName(a.dtype))},
                             {"shape", a.shape},
                             {"replicated", a.replicated}});
    o["shards"] = nlohmann::json::array();
    for (const ckpt::ShardMeta& sh : m.shards)
      o["shards"].push_back(
          {{"file", sh.file}, {"ranks", sh.ranks}, {"bytes", sh.bytes}, {"datasets", sh.datasets.size()}});
    std::cout << JsonDump(o) << "\n";
    return 0;
  }
  std::printf("version     %s\nrun         %s\nstep        %lld\nstatus      %s\ntime        %s\nworld size  %d\n"
              "group size  %d%s\nbaton       %s\nbytes       %llu\nuser blob   %zu bytes\n\n",
              Printable(v.path).c_str(), m.run_id.empty() ? "- (format 1)" : m.run_id.c_str(),
              static_cast<long long>(m.step), std::string(ckpt::VersionStatusName(v.status)).c_str(),
              Printable(m.time).c_str(), m.world_size, m.group_size, m.group_size == 0 ? " (one shard per node)" : "",
              Printable(m.baton_version).c_str(), static_cast<unsigned long long>(m.total_bytes()),
              m.user_blob.size());
  std::printf("%-32s  %-5s  %-10s  %s\n", "ARRAY", "DTYPE", "KIND", "SHAPE");
  for (const ckpt::ArrayMeta& a : m.arrays) {
    std::string shape = "[";
    for (size_t i = 0; i < a.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(a.shape[i]);
    std::printf("%-32s  %-5s  %-10s  %s]\n", Printable(a.name).c_str(), std::string(DTypeName(a.dtype)).c_str(),
                a.replicated ? "replicated" : "sharded", shape.c_str());
  }
  std::printf("\n%-24s  %14s  %8s  %s\n", "SHARD", "BYTES", "DATASETS", "RANKS");
  for (const ckpt::ShardMeta& sh : m.shards) {
    std::string ranks;
    // Consecutive ranks print as a range, so a node of 64 ranks is one line.
    for (size_t i = 0; i < sh.ranks.size();) {
      size_t j = i;
      while (j + 1 < sh.ranks.size() && sh.ranks[j + 1] == sh.ranks[j] + 1) ++j;
      ranks += (ranks.empty() ? "" : ",") + std::to_string(sh.ranks[i]) +
               (j > i ? "-" + std::to_string(sh.ranks[j]) : "");
      i = j + 1;
    }
    std::printf("%-24s  %14llu  %8zu  %s\n", Printable(sh.file).c_str(), static_cast<unsigned long long>(sh.bytes),
                sh.datasets.size(), ranks.c_str());
  }
  return 0;
}

// A progress bar on stderr, only when it is a terminal.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO)) {}
  ~Progress() {
    if (shown_) std::fputs("\n", stderr);
  }
  void Update(const std::string& label, uint64_t done, uint64_t total) {
    if (!enabled_ || total == 0) return;
    const int width = 40, filled = static_cast<int>(width * done / total);
    std::fprintf(stderr, "\r%-28.28s [%s%s] %3d%%", label.c_str(), std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(width - filled), ' ').c_str(), static_cast<int>(100 * done / total));
    std::fflush(stderr);
    shown_ = true;
  }

 private:
  bool enabled_, shown_ = false;
};

int Verify(const std::vector<std::string>& args) {
  Common c;
  bool no_progress = false;
  po::options_description extra;
  extra.add_options()("no-progress", po::bool_switch(&no_progress), "no progress bar");
  po::variables_map vm;
  if (int rc = ParseCommon("verify", args, extra, &c, &vm); rc != 0) return rc < 0 ? 0 : rc;
  fs::Env* env = fs::Env::Default();
  std::vector<ckpt::VersionInfo> versions, todo;
  if (Status s = ckpt::ListVersions(env, c.dir, c.max_failures, &versions); !s.ok()) return Fail("verify", s);
  // Without --step every committed version is verified: the question is
  // usually "what can I still restore from?".
  if (c.step) {
    ckpt::VersionInfo v;
    if (Status s = PickVersion(versions, c, &v); !s.ok()) return Fail("verify", s);
    todo.push_back(v);
  } else {
    for (const ckpt::VersionInfo& v : versions)
      if (v.status != ckpt::VersionStatus::kIncomplete) todo.push_back(v);
    if (todo.empty()) return Fail("verify", Status::NotFound("cli", "no committed version in " + c.dir));
  }
  int bad = 0;
  for (const ckpt::VersionInfo& v : todo) {
    ckpt::Manifest m;
    std::vector<std::string> failures;
    uint64_t bytes = 0;
    Status s = LoadManifest(env, v, &m, /*whole=*/true);
    if (s.ok()) {
      Progress progress(!no_progress);
      s = ckpt::VerifyVersion(env, v.path, m, &failures, &bytes, [&](uint64_t done, uint64_t total) {
        progress.Update(Printable(v.path.substr(v.path.find_last_of('/') + 1)), done, total);
      });
    }
    if (!s.ok()) failures.push_back(s.ToString());
    if (failures.empty()) {
      std::printf("ok      %s  step %lld  %llu bytes\n", Printable(v.path).c_str(), static_cast<long long>(v.step),
                  static_cast<unsigned long long>(bytes));
    } else {
      ++bad;
      std::printf("FAILED  %s  step %lld\n", Printable(v.path).c_str(), static_cast<long long>(v.step));
      for (const std::string& f : failures) std::printf("  %s\n", Printable(f).c_str());
    }
  }
  return bad == 0 ? 0 : 1;
}

int Gc(const std::vector<std::string>& args) {
  Common c;
  int keep = -1;
  bool dry_run = false;
  po::options_description extra;
  extra.add_options()("keep", po::value(&keep), "committed versions to keep (required, >= 1)")(
      "dry-run,n", po::bool_switch(&dry_run), "print what would be removed, remove nothing");
  po::variables_map vm;
  if (int rc = ParseCommon("gc", args, extra, &c, &vm); rc != 0) return rc < 0 ? 0 : rc;
  if (!vm.count("keep")) return Usage("gc: --keep K is required");
  if (keep < 1) return Usage("gc: --keep: invalid value '" + std::to_string(keep) + "' (expected >= 1)");
  fs::Env* env = fs::Env::Default();
  std::vector<ckpt::VersionInfo> versions;
  if (Status s = ckpt::ListVersions(env, c.dir, c.max_failures, &versions); !s.ok()) return Fail("gc", s);
  // `gc /` and `gc /etc` once succeeded silently: a directory with neither
  // a version nor the run file of a Checkpointer is not cleaned.
  fs::FileInfo run_info;
  if (versions.empty() && !env->Stat(c.dir + "/" + ckpt::kRunFileName, &run_info).ok()) {
    return Fail("gc", Status::InvalidArgument("cli", c.dir + " holds no checkpoint (no version directory, no " +
                                                         ckpt::kRunFileName + " file): refusing to clean it"));
  }
  // A live writer may be saving or applying its own retention: its lock
  // (ckpt/run.h) keeps gc out, as it keeps out a second writer.
  std::unique_ptr<fs::FileLock> lock;
  if (!dry_run) {
    const std::string holder = "baton ckpt gc, pid " + std::to_string(::getpid());
    Status s = env->LockFile(c.dir + "/" + ckpt::kWriterLockName, 0600, holder, &lock);
    if (!s.ok()) return Fail("gc", s.Annotate("a live writer uses " + c.dir + "; gc when it has ended"));
  }
  for (const ckpt::VersionInfo& v : versions) {
    if (!v.problem.empty()) {
      std::cerr << "baton ckpt gc: left " << Printable(v.path) << ": " << Printable(v.problem) << "\n";
    }
  }
  int failed = 0;
  for (const ckpt::VersionInfo& v : ckpt::PlanRetention(versions, keep)) {
    Status s = dry_run ? Status::OK() : ckpt::RemoveVersion(env, v);
    if (!s.ok()) {
      ++failed;
      std::cerr << "baton ckpt gc: " << Printable(s.ToString()) << "\n";
      continue;
    }
    std::printf("%s %s  (step %lld, %s)\n", dry_run ? "would remove" : "removed", Printable(v.path).c_str(),
                static_cast<long long>(v.step), std::string(ckpt::VersionStatusName(v.status)).c_str());
  }
  return failed == 0 ? 0 : 1;
}

// The subcommands, without the out-of-memory guard.
int CkptSubcommand(const std::vector<std::string>& args) {
  if (args.empty()) return Usage("");
  const std::string sub = args[0];
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "ls") return Ls(rest);
  if (sub == "inspect") return Inspect(rest);
  if (sub == "verify") return Verify(rest);
  if (sub == "gc") return Gc(rest);
  if (sub == "help" || sub == "--help" || sub == "-h") {
    std::cout << kUsage;
    return 0;
  }
  return Usage("unknown subcommand '" + Printable(sub) + "'");
}

}  // namespace

int CkptCommand(const std::vector<std::string>& args) {
  try {
    return CkptSubcommand(args);
  } catch (const std::bad_alloc&) {
    // The sizes a hostile directory claims are checked against the files
    // before anything is allocated; this is the last line if one is not.
    std::cerr << "baton ckpt: out of memory\n";
    return 1;
  }
}

}  // namespace baton::cli
