// baton ckpt ls|inspect|verify|gc: the checkpoint directory seen from a
// login node. MPI is never initialized here; the shards are read with
// HDF5's serial driver (ckpt/verify.h) and the rest is the MPI-free
// catalog and manifest code that the Checkpointer itself uses, so the tool
// and a restore never disagree about what a version is. `ckpt import|export`
// need Python and torch: ckpt_convert_command.cc hands them over.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iostream>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/printable.h"
#include "baton/checkpointer.h"
#include "baton/status.h"
#include "ckpt/catalog.h"
#include "ckpt/fs/env.h"
#include "ckpt/manifest.h"
#include "ckpt/manifest_index.h"
#include "ckpt/node_local_level.h"
#include "ckpt/retention.h"
#include "ckpt/run.h"
#include "ckpt/slurm_job_life.h"
#include "ckpt/state_dict_tree.h"
#include "ckpt/verify.h"
#include "ckpt/version_removal.h"
#include "cli/text_table.h"
#include "ckpt/writer_lock.h"
#include "cli/commands.h"

namespace baton::cli {
namespace {

namespace po = boost::program_options;
namespace fs = ::baton::ckpt::fs;

constexpr const char* kUsage =
    "usage: baton ckpt ls      [DIR] [--local-dir L] [--json]\n"
    "       baton ckpt inspect [DIR] [--step N] [--json]\n"
    "       baton ckpt verify  [DIR] [--level shared|node-local|all] [--local-dir L] [--step N] [--no-progress]\n"
    "       baton ckpt gc      [DIR] [--level shared|node-local] [--keep K] [--local-dir L] [--dry-run]\n"
    "       baton ckpt import  SRC DIR [--step N] [--keep K]          (SRC: a DCP directory or a torch.save file)\n"
    "       baton ckpt export  DIR DST [--step N] [--format dcp|torch] [--force]\n"
    "DIR defaults to $BATON_CKPT_DIR, L to $BATON_LOCAL_DIR. See baton(1).\n";

// The levels a command works on (ckpt/README.md, "Levels 2 and 3"), named
// as `ls` shows them.
enum class Level { kShared, kNodeLocal, kAll };
const char* LevelName(Level l) { return l == Level::kShared ? "shared" : l == Level::kNodeLocal ? "node-local" : "all"; }


struct Common {
  std::string dir;
  std::optional<int64_t> step;
  bool json = false;
  int max_failures = 2;
};

// Text from a checkpoint directory (a manifest's time, names, error
// messages quoting them) is untrusted: printed through Printable
// (base/printable.h).

// JSON of untrusted text: invalid UTF-8 replaced, control characters
// escaped (nlohmann's dump does that for \u0000-\u001f).
std::string JsonDump(const nlohmann::json& j) { return j.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace); }

int Usage(const std::string& why) {
  if (!why.empty()) std::cerr << "baton ckpt: " << why << "\n";
  std::cerr << kUsage;
  return 2;
}

// A version whose directory or manifest could not be examined (EACCES,
// EIO: ListVersions' problem), as opposed to one without a manifest: its
// status says "incomplete" only for want of knowing.
bool Unreadable(const ckpt::VersionInfo& v) {
  return !v.problem.empty() && v.problem.rfind(ckpt::kRestoreFailuresName, 0) != 0;
}
std::string StatusText(const ckpt::VersionInfo& v) {
  return Unreadable(v) ? "unreadable" : std::string(ckpt::VersionStatusName(v.status));
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
  uint64_t max_values = 0;
  BATON_RETURN_IF_ERROR(ckpt::ReadManifestText(env, v.path, v.path + "/" + ckpt::kManifestName, &text, &max_values));
  BATON_RETURN_IF_ERROR(ckpt::ParseManifestJson(text, m, max_values).Annotate(v.path + "/" + ckpt::kManifestName));
  // Its step is its directory's (an edited step, another version's files).
  BATON_RETURN_IF_ERROR(ckpt::CheckManifestStep(*m, v.step, v.name).Annotate(v.path + "/" + ckpt::kManifestName));
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
  if (!c.step) return Status::NotFound("cli", "no committed version in " + c.dir);
  // The steps there are (newest first, at most 20): what a user asking for
  // a step that is gone looks for next.
  constexpr size_t kStepsShown = 20;
  std::vector<int64_t> steps;
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
    if (it->status != ckpt::VersionStatus::kIncomplete) steps.push_back(it->step);
  }
  std::string there;
  for (size_t i = 0; i < steps.size() && i < kStepsShown; ++i) there += (i ? ", " : "") + std::to_string(steps[i]);
  if (steps.size() > kStepsShown) there += " and " + std::to_string(steps.size() - kStepsShown) + " older";
  return Status::NotFound("cli", "no committed version of step " + std::to_string(*c.step) + " in " + c.dir +
                                     (steps.empty() ? " (it holds none)"
                                                    : "; the committed steps there, newest first: " + there));
}

// The level-2 directory of DIR's run on this node: <local_dir>/<run id>/
// (ckpt/node_local_level.h). NotFound when DIR has no run file (no writer
// ever used it) or that directory does not exist here.
Status LocalRoot(fs::Env* env, const std::string& dir, const std::string& local_dir, std::string* root) {
  ckpt::RunInfo run;
  Status s = ckpt::ReadRun(env, dir, &run);
  if (s.code() == Code::kNotFound) {
    return Status::NotFound("cli", dir + " has no " + ckpt::kRunFileName +
                                       " file: no run, so no node-local directory of one");
  }
  BATON_RETURN_IF_ERROR(s);
  *root = local_dir + "/" + run.run_id;
  fs::FileInfo info;
  s = env->Stat(*root, &info);
  if (s.code() == Code::kNotFound) {
    return Status::NotFound("cli", *root + ": no node-local directory of run " + run.run_id + " on this node");
  }
  BATON_RETURN_IF_ERROR(s);
  if (info.type != fs::FileType::kDirectory) {
    return Status::InvalidArgument("cli", *root + ": not a directory");
  }
  return Status::OK();
}

// Level 2 as this node sees it: the complete versions in its LocalRoot,
// by name. Other nodes' local disks are not visible from here; a missing
// directory is an empty level 2.
Status LocalVersions(fs::Env* env, const std::string& dir, const std::string& local_dir,
                     std::vector<ckpt::VersionInfo>* out, std::string* root) {
  out->clear();
  Status s = LocalRoot(env, dir, local_dir, root);
  if (s.code() == Code::kNotFound) return Status::OK();
  BATON_RETURN_IF_ERROR(s);
  std::vector<ckpt::VersionInfo> all;
  BATON_RETURN_IF_ERROR(ckpt::ListVersions(env, *root, 1 << 30, &all));
  for (const ckpt::VersionInfo& v : all) {
    if (v.status == ckpt::VersionStatus::kComplete) out->push_back(v);
  }
  return Status::OK();
}

// --local-dir, else $BATON_LOCAL_DIR, resolved as DIR is when it exists
// (a missing one is kept as given: the callers say what it means).
Status LocalDirOption(std::string* local_dir) {
  if (local_dir->empty()) {
    const char* env = std::getenv("BATON_LOCAL_DIR");
    if (env != nullptr) *local_dir = env;
  }
  if (local_dir->empty()) return Status::OK();
  Status s = ResolveDir(local_dir);
  return s.code() == Code::kNotFound ? Status::OK() : s;
}

// --level: `allowed` lists the names this subcommand takes; a bad one is
// named. Returns 0 to go on, else the exit status.
int ParseLevel(const char* sub, const std::string& text, const std::vector<Level>& allowed, Level* out) {
  std::string expected;
  for (Level l : allowed) {
    if (text == LevelName(l)) {
      *out = l;
      return 0;
    }
    expected += (expected.empty() ? "" : ", ") + std::string(LevelName(l));
  }
  return Usage(std::string(sub) + ": --level: invalid value '" + Printable(text) + "' (expected " + expected + ")");
}

// "[4096, 64]"
template <typename Int>
std::string ShapeText(const std::vector<Int>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// "0-3,8,10-11": ranks in ascending runs.
std::string RankRanges(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return out;
}

// What a directory without baton versions holds, for the message that says so: another tool's checkpoint
// and the command that reads it, or how many entries.
std::string WhatElse(fs::Env* env, const std::string& dir) {
  std::vector<std::string> names;
  if (!env->ListDir(dir, &names).ok()) return "";
  for (const std::string& n : names) {
    if (n == ".metadata") return " (a DCP checkpoint: import it with `baton ckpt import " + dir + " NEWDIR`)";
  }
  size_t others = 0;
  for (const std::string& n : names) {
    others += n != "writer.lock" && n != "run" && n != "events" && !ckpt::IsRemovingName(n) ? 1 : 0;
  }
  if (others == 0) return " (it is empty but for baton's own files)";
  return " (it holds " + std::to_string(others) + (others == 1 ? " other entry)" : " other entries)");
}

int Ls(const std::vector<std::string>& args) {
  Common c;
  po::variables_map vm;
  std::string local_dir;
  po::options_description extra;
  extra.add_options()("local-dir", po::value(&local_dir),
                      "node-local directory of level 2, as seen on this node (default: $BATON_LOCAL_DIR)");
  if (int rc = ParseCommon("ls", args, extra, &c, &vm); rc != 0) return rc < 0 ? 0 : rc;
  if (Status s = LocalDirOption(&local_dir); !s.ok()) return Fail("ls", s);
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
  // Which node-local copies a restore would pass over: those of versions
  // the shared directory lost (ckpt::Level3Lost, docs/recovery.md).
  std::set<std::string> in_shared;
  for (size_t i = 0; i < versions.size(); ++i) {
    if (shared[i] && versions[i].status != ckpt::VersionStatus::kIncomplete) in_shared.insert(versions[i].name);
  }
  std::vector<std::string> passed_over(versions.size());
  for (size_t i = 0; i < versions.size(); ++i) {
    if (!node_local[i] || versions[i].status == ckpt::VersionStatus::kIncomplete) continue;
    std::string text;
    ckpt::Level3Record r;
    if (env->ReadFile(local_root + "/" + versions[i].name + "/" + ckpt::kLevel3RecordName, 4096, &text).ok()) {
      r = ckpt::ParseLevel3Record(text);
    }
    std::string why;
    if (ckpt::Level3Lost(versions[i].name, r, in_shared, c.dir, &why)) passed_over[i] = why;
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
                        {"status", StatusText(v)},
                        {"time", have ? nlohmann::json(m.time) : nlohmann::json(nullptr)},
                        {"world_size", have ? nlohmann::json(m.world_size) : nlohmann::json(nullptr)},
                        {"bytes", have ? nlohmann::json(m.total_bytes()) : nlohmann::json(nullptr)},
                        {"levels", levels},
                        {"restore_failures", v.restore_failures}};
    if (!s.ok()) o["error"] = s.ToString();
    if (!v.problem.empty()) o["problem"] = v.problem;
    if (!passed_over[i].empty()) o["node_local_not_restored"] = passed_over[i];
    if (c.json) {
      list.push_back(o);
      continue;
    }
    std::string note = s.ok() ? "" : "  (" + s.message() + ")";
    if (!v.problem.empty()) note += "  (" + v.problem + ")";
    if (!passed_over[i].empty()) note += "  (node-local copy not restored: " + passed_over[i] + ")";
    std::printf("%10lld  %-11s  %-20s  %6s  %14s  %-17s  %s%s\n", static_cast<long long>(v.step),
                StatusText(v).c_str(), have ? Printable(m.time).c_str() : "-",
                have ? std::to_string(m.world_size).c_str() : "-", have ? std::to_string(m.total_bytes()).c_str() : "-",
                level_text.c_str(), Printable(v.path).c_str(), Printable(note).c_str());
  }
  if (c.json) std::cout << JsonDump(list) << "\n";
  if (versions.empty()) {
    // No baton version is an answer a script must not take for an empty table: exit 1, saying what is there.
    std::cerr << "baton ckpt ls: " << Printable(c.dir) << " holds no baton version" << Printable(WhatElse(env, c.dir))
              << "\n";
    return 1;
  }
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
  // A version saved from a state dict (Python's one format): its whole tensors by path, beside the arrays
  // that hold their boxes.
  bool state_dict = false;
  std::vector<ckpt::StateDictTensor> tensors;
  if (Status s = ckpt::StateDictTensors(m.user_blob, &state_dict, &tensors); !s.ok())
    return Fail("inspect", s.Annotate(v.path));
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
    if (state_dict) {
      o["tensors"] = nlohmann::json::array();
      for (const ckpt::StateDictTensor& t : tensors)
        o["tensors"].push_back({{"path", t.path}, {"dtype", t.dtype}, {"shape", t.shape}, {"arrays", t.arrays}});
    }
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
  TextTable arrays({"ARRAY", "DTYPE", "KIND", "SHAPE"});
  for (const ckpt::ArrayMeta& a : m.arrays)
    arrays.AddRow({Printable(a.name), std::string(DTypeName(a.dtype)), a.replicated ? "replicated" : "sharded",
                   ShapeText(a.shape)});
  arrays.Print(stdout);
  if (state_dict) {
    TextTable whole({"TENSOR", "DTYPE", "SHAPE", "ARRAYS"});
    for (const ckpt::StateDictTensor& t : tensors)
      whole.AddRow({Printable(t.path), Printable(t.dtype), ShapeText(t.shape),
                    t.arrays.size() == 1 ? Printable(t.arrays[0]) : std::to_string(t.arrays.size()) + " boxes"});
    std::printf("\n");
    whole.Print(stdout);
  }
  // Consecutive ranks print as a range, so a node of 64 ranks is one line.
  TextTable shards({"SHARD", "BYTES", "DATASETS", "RANKS"},
                   {TextTable::Align::kLeft, TextTable::Align::kRight, TextTable::Align::kRight});
  for (const ckpt::ShardMeta& sh : m.shards)
    shards.AddRow({Printable(sh.file), std::to_string(sh.bytes), std::to_string(sh.datasets.size()),
                   RankRanges(sh.ranks)});
  std::printf("\n");
  shards.Print(stdout);
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

// The versions of one level that verify checks: with --step, the newest
// committed one of that step (none: an empty list); else every committed one.
// Every committed version, and every version that could not be examined
// (Unreadable: what it holds is not known, so verify cannot say it is
// fine); of --step N only.
std::vector<ckpt::VersionInfo> VersionsToVerify(const std::vector<ckpt::VersionInfo>& versions, const Common& c) {
  std::vector<ckpt::VersionInfo> todo;
  if (c.step) {
    ckpt::VersionInfo v;
    if (PickVersion(versions, c, &v).ok()) todo.push_back(v);
    for (const ckpt::VersionInfo& u : versions)
      if (Unreadable(u) && u.step == *c.step) todo.push_back(u);
    return todo;
  }
  for (const ckpt::VersionInfo& v : versions)
    if (v.status != ckpt::VersionStatus::kIncomplete || Unreadable(v)) todo.push_back(v);
  return todo;
}

// Whether `path` is there (any answer but NotFound counts: the check that
// follows then reports what is wrong with it).
bool Present(fs::Env* env, const std::string& path) {
  fs::FileInfo info;
  return env->Stat(path, &info).code() != Code::kNotFound;
}

// One version of level 2 as this node holds it: each shard of the manifest
// found as an own copy (in the version directory) or a partner copy (in
// partner/), a file or its index being there enough to count it held so
// that a half-missing pair is a failure naming the missing file. A node
// holds its own ranks' and its partner node's, so shards found in neither
// place are other nodes' (reported, not failed); a node with none at all
// has lost its copies, since it wrote its own before committing.
struct NodeLocalCheck {
  int own = 0, partner = 0;
  std::vector<int> elsewhere_ranks;  // ranks of the shards not on this node
  size_t elsewhere_shards = 0;
};

Status VerifyNodeLocal(fs::Env* env, const ckpt::VersionInfo& v, const ckpt::Manifest& m, NodeLocalCheck* check,
                       std::vector<std::string>* failures, uint64_t* bytes, const ckpt::VerifyProgress& progress) {
  const std::string partner_dir = v.path + "/" + ckpt::kPartnerDirName;
  std::vector<ckpt::ShardCopy> copies;
  // A partner/ that is a symlink would verify copies kept outside the
  // version (lstat follows a link in the middle of a path).
  const Status partner_ok = ckpt::CheckPartnerDir(env, v.path);
  if (!partner_ok.ok()) failures->push_back(partner_ok.message());
  for (size_t i = 0; i < m.shards.size(); ++i) {
    const ckpt::ShardMeta& sh = m.shards[i];
    bool held = false;
    if (Present(env, v.path + "/" + sh.file) || Present(env, v.path + "/" + sh.index)) {
      copies.push_back({i, v.path, ""});
      ++check->own;
      held = true;
    }
    if (partner_ok.ok() && (Present(env, partner_dir + "/" + sh.file) || Present(env, partner_dir + "/" + sh.index))) {
      copies.push_back({i, partner_dir, std::string(ckpt::kPartnerDirName) + "/"});
      ++check->partner;
      held = true;
    }
    if (!held) {
      ++check->elsewhere_shards;
      check->elsewhere_ranks.insert(check->elsewhere_ranks.end(), sh.ranks.begin(), sh.ranks.end());
    }
  }
  if (check->own == 0) {
    failures->push_back("no own copy of any shard: this node's files of the version are gone");
  }
  return ckpt::VerifyShardCopies(env, m, copies, failures, bytes, progress);
}

int Verify(const std::vector<std::string>& args) {
  Common c;
  bool no_progress = false;
  std::string level_text, local_dir;
  po::options_description extra;
  extra.add_options()("no-progress", po::bool_switch(&no_progress), "no progress bar")(
      "level", po::value(&level_text),
      "shared, node-local or all (default: all when this node has a node-local directory of the run, else shared)")(
      "local-dir", po::value(&local_dir),
      "node-local directory of level 2, as seen on this node (default: $BATON_LOCAL_DIR)");
  po::variables_map vm;
  if (int rc = ParseCommon("verify", args, extra, &c, &vm); rc != 0) return rc < 0 ? 0 : rc;
  Level level = Level::kShared;
  if (vm.count("level")) {
    if (int rc = ParseLevel("verify", level_text, {Level::kShared, Level::kNodeLocal, Level::kAll}, &level); rc != 0)
      return rc;
  }
  if (Status s = LocalDirOption(&local_dir); !s.ok()) return Fail("verify", s);
  if (vm.count("level") && level != Level::kShared && local_dir.empty()) {
    return Usage(std::string("verify: --level ") + LevelName(level) +
                 ": no node-local directory: give --local-dir L or set BATON_LOCAL_DIR");
  }
  fs::Env* env = fs::Env::Default();
  std::string root;
  if (!local_dir.empty()) {
    Status s = LocalRoot(env, c.dir, local_dir, &root);
    if (!vm.count("level")) {
      // The default: every level this node can see.
      if (s.ok()) level = Level::kAll;
      else if (s.code() != Code::kNotFound) return Fail("verify", s);
    } else if (level != Level::kShared && !s.ok()) {
      return Fail("verify", s);
    }
  }
  struct Todo {
    Level level;
    ckpt::VersionInfo v;
  };
  std::vector<Todo> todo;
  std::vector<std::string> empty_levels;  // checked levels with nothing to verify
  if (level != Level::kNodeLocal) {
    std::vector<ckpt::VersionInfo> versions;
    if (Status s = ckpt::ListVersions(env, c.dir, c.max_failures, &versions); !s.ok()) return Fail("verify", s);
    for (const ckpt::VersionInfo& v : VersionsToVerify(versions, c)) todo.push_back({Level::kShared, v});
    if (todo.empty()) empty_levels.push_back(c.dir);
  }
  if (level != Level::kShared) {
    std::vector<ckpt::VersionInfo> versions;
    if (Status s = ckpt::ListVersions(env, root, 1 << 30, &versions); !s.ok()) return Fail("verify", s);
    const size_t before = todo.size();
    for (const ckpt::VersionInfo& v : VersionsToVerify(versions, c)) todo.push_back({Level::kNodeLocal, v});
    if (todo.size() == before) empty_levels.push_back(root);
  }
  // Without --step every committed version is verified: the question is
  // usually "what can I still restore from?".
  const std::string what = c.step ? "no committed version of step " + std::to_string(*c.step) : "no committed version";
  if (todo.empty()) {
    std::string where;
    for (const std::string& d : empty_levels) where += (where.empty() ? " in " : " nor in ") + d;
    return Fail("verify", Status::NotFound("cli", what + where));
  }
  for (const std::string& d : empty_levels) std::printf("note    %s in %s\n", what.c_str(), Printable(d).c_str());
  int bad = 0;
  for (const Todo& t : todo) {
    const ckpt::VersionInfo& v = t.v;
    ckpt::Manifest m;
    std::vector<std::string> failures;
    uint64_t bytes = 0;
    NodeLocalCheck held;
    const bool node_local = t.level == Level::kNodeLocal;
    // Level 2 holds some shards' indexes only: loaded per copy.
    Status s = Unreadable(v) ? Status::IOError("cli", "unreadable: " + v.problem)
                             : LoadManifest(env, v, &m, /*whole=*/!node_local);
    if (s.ok()) {
      Progress progress(!no_progress);
      auto report = [&](uint64_t done, uint64_t total) {
        progress.Update(Printable(v.path.substr(v.path.find_last_of('/') + 1)), done, total);
      };
      s = node_local ? VerifyNodeLocal(env, v, m, &held, &failures, &bytes, report)
                     : ckpt::VerifyVersion(env, v.path, m, &failures, &bytes, report);
    }
    if (!s.ok()) failures.push_back(s.ToString());
    const std::string shards = node_local ? "  (shards: own " + std::to_string(held.own) + ", partner " +
                                                std::to_string(held.partner) + ")"
                                          : "";
    if (failures.empty()) {
      std::printf("ok      %-10s  %s  step %lld  %llu bytes%s\n", LevelName(t.level), Printable(v.path).c_str(),
                  static_cast<long long>(v.step), static_cast<unsigned long long>(bytes), shards.c_str());
    } else {
      ++bad;
      std::printf("FAILED  %-10s  %s  step %lld%s\n", LevelName(t.level), Printable(v.path).c_str(),
                  static_cast<long long>(v.step), shards.c_str());
      for (const std::string& f : failures) std::printf("  %s\n", Printable(f).c_str());
    }
    if (held.elsewhere_shards > 0) {
      std::printf("  not on this node: %zu of %zu shards (ranks %s), held by other nodes\n", held.elsewhere_shards,
                  m.shards.size(), RankRanges(held.elsewhere_ranks).c_str());
    }
  }
  return bad == 0 ? 0 : 1;
}

int Gc(const std::vector<std::string>& args) {
  Common c;
  int keep = -1;
  bool dry_run = false;
  std::string level_text = "shared", local_dir;
  const CheckpointOptions defaults;  // the Checkpointer's own retention
  po::options_description extra;
  extra.add_options()("level", po::value(&level_text), "shared or node-local (default: shared)")(
      "keep", po::value(&keep),
      ("committed versions to keep, >= 1 (default: " + std::to_string(defaults.keep) + " for shared, " +
       std::to_string(defaults.local_keep) + " for node-local, as the Checkpointer keeps)")
          .c_str())("local-dir", po::value(&local_dir),
                    "node-local directory of level 2, as seen on this node (default: $BATON_LOCAL_DIR)")(
      "dry-run,n", po::bool_switch(&dry_run), "print what would be removed, remove nothing");
  po::variables_map vm;
  if (int rc = ParseCommon("gc", args, extra, &c, &vm); rc != 0) return rc < 0 ? 0 : rc;
  Level level = Level::kShared;
  if (int rc = ParseLevel("gc", level_text, {Level::kShared, Level::kNodeLocal}, &level); rc != 0) return rc;
  if (!vm.count("keep")) keep = level == Level::kShared ? defaults.keep : defaults.local_keep;
  if (keep < 1) return Usage("gc: --keep: invalid value '" + std::to_string(keep) + "' (expected >= 1)");
  fs::Env* env = fs::Env::Default();
  // The directory whose versions go: DIR, or this node's level 2 of DIR's run.
  std::string target = c.dir;
  int max_failures = c.max_failures;
  if (level == Level::kNodeLocal) {
    if (Status s = LocalDirOption(&local_dir); !s.ok()) return Fail("gc", s);
    if (local_dir.empty()) {
      return Usage("gc: --level node-local: no node-local directory: give --local-dir L or set BATON_LOCAL_DIR");
    }
    if (Status s = LocalRoot(env, c.dir, local_dir, &target); !s.ok()) {
      return Fail("gc", s.Annotate(local_dir + " holds no node-local checkpoint of " + c.dir + ": refusing to clean it"));
    }
    max_failures = 1 << 30;  // as the Checkpointer's level-2 retention counts them
  }
  std::vector<ckpt::VersionInfo> versions;
  if (Status s = ckpt::ListVersions(env, target, max_failures, &versions); !s.ok()) return Fail("gc", s);
  // `gc /` and `gc /etc` once succeeded silently: a directory with neither
  // a version nor the run file of a Checkpointer is not cleaned. (A
  // node-local one exists only where a Checkpointer made it: LocalRoot.)
  fs::FileInfo run_info;
  if (level == Level::kShared && versions.empty() && !env->Stat(c.dir + "/" + ckpt::kRunFileName, &run_info).ok()) {
    return Fail("gc", Status::InvalidArgument("cli", c.dir + " holds no checkpoint (no version directory, no " +
                                                         ckpt::kRunFileName + " file): refusing to clean it"));
  }
  // A live writer may be saving or applying its own retention: its lock
  // (ckpt/run.h) keeps gc out, as it keeps out a second writer. Level 2
  // has no lock of its own (docs/checkpoint-format.md): the run's
  // Checkpointer holds DIR's for its whole life, covering every node's
  // local directory of the run, so node-local gc takes that one too.
  std::unique_ptr<fs::FileLock> lock;
  if (!dry_run) {
    std::string why;
    if (env->ReadOnly(c.dir, &why)) {
      return Fail("gc", Status::InvalidArgument("cli", c.dir + " is read-only (" + why + "): nothing can be removed"));
    }
    ckpt::WriterIdentity me;
    me.pid = static_cast<long>(::getpid());
    char host[256] = "";
    (void)::gethostname(host, sizeof host - 1);
    me.host = host;
    const char* job = std::getenv("SLURM_JOB_ID");
    const char* step = std::getenv("SLURM_STEP_ID");
    me.job = job != nullptr ? job : "";
    me.step = step != nullptr ? step : "";
    const std::time_t now = std::time(nullptr);
    char since[64] = "";
    std::strftime(since, sizeof since, "%Y-%m-%dT%H:%M:%SZ (baton ckpt gc)", std::gmtime(&now));
    std::string how;
    Status s = ckpt::AcquireWriterLock(env, c.dir, 0600, me, since, ckpt::SlurmJobLife, &lock, &how);
    if (s.code() == Code::kUnavailable) {
      return Fail("gc", s.Annotate("a live writer uses " + c.dir + "; gc when it has ended"));
    }
    if (!s.ok()) return Fail("gc", s);
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
    std::printf("%s %s  (%s, step %lld, %s)\n", dry_run ? "would remove" : "removed", Printable(v.path).c_str(),
                LevelName(level), static_cast<long long>(v.step),
                std::string(ckpt::VersionStatusName(v.status)).c_str());
  }
  // Versions a Checkpointer's retention had renamed away and was removing when its process died
  // (ckpt/version_removal.h): none is a version any more.
  for (const ckpt::VersionInfo& v : ckpt::LeftoverRemovals(env, target)) {
    Status s = dry_run ? Status::OK() : ckpt::RemoveVersion(env, v);
    if (!s.ok()) {
      ++failed;
      std::cerr << "baton ckpt gc: " << Printable(s.ToString()) << "\n";
      continue;
    }
    std::printf("%s %s  (%s, the rest of an interrupted removal)\n", dry_run ? "would remove" : "removed",
                Printable(v.path).c_str(), LevelName(level));
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
  if (sub == "import" || sub == "export") return CkptConvertCommand(sub, rest);
  if (sub == "help" || sub == "--help" || sub == "-h") {
    std::cout << kUsage;
    return 0;
  }
  return Usage("unknown subcommand '" + Printable(sub) + "'");
}

}  // namespace

int CkptCommand(const std::vector<std::string>& args) {
  // ls, verify, inspect, gc, import and export read or convert a directory:
  // none is a launch of the job whose checkpoints they touch, so none writes
  // into its event log (docs/events.md): an export's restore through a
  // Checkpointer (python -m baton.dcp inherits this) was counted as a launch,
  // and `baton report` then showed a goodput of 1.6 % instead of 6.3 %.
  ::setenv("BATON_EVENTS", "0", 1);
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
