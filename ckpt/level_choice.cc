// Restore's choice of level (ckpt/README.md, "Levels 2 and 3"): the newest
// version every rank can read from node-local copies, unless the shared
// directory holds a newer one.
//
//   1. every rank lists what its node holds (NodeLocalLevel::List: the
//      complete versions, whether its own shard is there, whose partner
//      copies are) and rank 0 gathers the lists;
//   2. rank 0 takes the newest version saved at this world size for which
//      every rank k has its own copy or some rank holds k's partner copy
//      (k's partner first), which is not older than the newest version of
//      level 3, and which level 3 did not lose: level 3's directory is the
//      record (docs/recovery.md), so a version whose level-3 copy was
//      committed is taken only while level 3 holds it, and one that level 3
//      never got (Level3Record "absent") only while level 3 holds the
//      version it followed; a version removed from the shared directory
//      (`baton ckpt gc`, rm -r) never comes back from level 2. It
//      broadcasts the version, which rank reads its manifest and where each
//      rank's shard comes from;
//   3. the manifest, read by that rank, broadcast; every rank compares it
//      with its registrations;
//   4. the fetch: a rank whose own copy is gone receives its shard and index
//      over MPI from the rank holding the partner copy (ckpt/
//      partner_exchange.h, verified), written back as its own copy;
//   5. every rank reads its rows from its node-local copy (restore.cc's
//      ReadMyRows: every byte verified), agreed; a rank whose own copy
//      fails its checksums (a flipped bit on the local disk) gets the
//      partner copy over MPI as in 4 and reads again, before level 2 is
//      given up.
// Any failure after step 2 is agreed, logged, and the restore goes on to
// level 3, which tries the same version there first: level 2 never decides
// that a version is damaged (nothing is recorded toward quarantine), but it
// skips versions quarantined in level 3 and marks its attempt there; a
// version level 3 does not hold is marked in rank 0's node-local copy
// instead, and skipped once rank 0's node counts max_restore_failures
// unfinished (or failed) attempts of it.
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "baton/log.h"
#include "ckpt/agreement.h"
#include "ckpt/checkpointer_impl.h"
#include "ckpt/checksum.h"
#include "ckpt/manifest_index.h"
#include "ckpt/partner_exchange.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::ckpt {
namespace {

// Each rank's list: one line per version, "<name> <world size> <own 0|1>
// <level-3 record: c, a or u> <its base, or -> <partner rank>...".
std::string Encode(const std::vector<NodeLocalLevel::Held>& held) {
  std::string out;
  for (const NodeLocalLevel::Held& h : held) {
    const char* kind = h.level3.kind == Level3Record::Kind::kCommitted ? "c"
                       : h.level3.kind == Level3Record::Kind::kAbsent  ? "a"
                                                                        : "u";
    out += h.name + " " + std::to_string(h.world_size) + " " + (h.own ? "1" : "0") + " " + kind + " " +
           (h.level3.base.empty() ? "-" : h.level3.base);
    for (int k : h.partner_of) out += " " + std::to_string(k);
    out += "\n";
  }
  return out;
}

// Rank 0's view of one version over all ranks.
struct Seen {
  uint64_t seq = 0;
  int64_t step = 0;
  int world_size = 0;
  int manifest_rank = -1;          // the lowest rank that holds its manifest
  std::set<int> own;               // ranks whose own copy is there
  std::map<int, std::vector<int>> holders;  // rank k -> ranks holding k's partner copy
  Level3Record level3;             // the first node's record that parses
};

}  // namespace

Status CheckpointerImpl::SameAsLevel3(const std::vector<VersionInfo>& level3, const std::string& name,
                                      const std::string& local_text) {
  auto v = std::find_if(level3.begin(), level3.end(), [&](const VersionInfo& i) { return i.name == name; });
  if (v == level3.end()) return Status::OK();  // level 2 alone holds it
  std::string shared_text;
  uint64_t values = 0;
  Status read = ReadManifestText(env_, v->path, v->path + "/" + kManifestName, &shared_text, &values);
  // Unreadable there: level 2's copy is not judged by it (level 3's own
  // restore would fail the same way).
  if (!read.ok()) return Status::OK();
  if (Xxh3(shared_text.data(), shared_text.size()) == Xxh3(local_text.data(), local_text.size())) return Status::OK();
  Manifest shared;
  std::string what = "its manifest is not level 3's of the same version (" + v->path + ")";
  if (ParseManifestJson(shared_text, &shared).ok()) {
    what += ": level 3's is of " + std::to_string(shared.world_size) + " ranks, written " + shared.time;
  }
  return Status::Corruption(log::kCkpt, local_.VersionDir(name) + ": " + what);
}

Status CheckpointerImpl::ChooseLevel2(const RestoreOptions& options, const std::vector<VersionInfo>& level3,
                                      const std::vector<std::string>& quarantined, PhaseClock* clock,
                                      Level2Choice* out) {
  *out = Level2Choice();
  const uint64_t level3_newest_seq = level3.empty() ? 0 : level3.back().seq;
  // 1. What every node holds.
  std::vector<NodeLocalLevel::Held> held;
  Status listed = local_.List(rank_, &held);
  if (!listed.ok()) {
    BATON_LOG(kCkpt, warning) << "level 2: rank " << rank_ << " cannot list " << local_.root() << ": " << listed;
    held.clear();
  }
  held.erase(std::remove_if(held.begin(), held.end(),
                            [&](const NodeLocalLevel::Held& h) {
                              return (options.step && h.step != *options.step) || !Selects(options, h.name);
                            }),
             held.end());
  const std::string mine = Encode(held);
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm_)));
  std::string all;
  if (rank_ == 0) {
    long long total = 0;
    for (int k = 0; k < size_; ++k) {
      displs[static_cast<size_t>(k)] = static_cast<int>(total);
      total += lens[static_cast<size_t>(k)];
    }
    if (total > INT_MAX) return Status::Internal(log::kCkpt, "level-2 listings of " + std::to_string(total) + " bytes");
    all.resize(static_cast<size_t>(total));
  }
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(),
                                                    displs.data(), MPI_CHAR, 0, comm_)));
  clock->Lap("list");

  // 2. Rank 0's choice.
  std::string name;
  int manifest_rank = -1;
  std::vector<int> source(static_cast<size_t>(size_), -1);  // -1: its own copy; else the rank sending it
  std::vector<int> spare(static_cast<size_t>(size_), -1);   // a holder of the partner copy, for a second read
  if (rank_ == 0) {
    // Versions only level 2 holds whose restores kept killing the processes
    // (attempt marks left in rank 0's copy): skipped like level 3's quarantine.
    std::set<std::string> marked_out;
    for (const NodeLocalLevel::Held& h : held) {
      const bool in_level3 =
          std::any_of(level3.begin(), level3.end(), [&](const VersionInfo& v) { return v.name == h.name; });
      if (!in_level3 && h.info.restore_failures >= options_.max_restore_failures) {
        marked_out.insert(h.name);
        BATON_LOG(kCkpt, warning) << "level 2: skipping " << h.info.path << ": quarantined after "
                                  << h.info.restore_failures << " failed restores";
      }
    }
    std::map<std::string, Seen> seen;
    for (int k = 0; k < size_; ++k) {
      std::istringstream in(all.substr(static_cast<size_t>(displs[static_cast<size_t>(k)]),
                                       static_cast<size_t>(lens[static_cast<size_t>(k)])));
      std::string line;
      while (std::getline(in, line)) {
        std::istringstream f(line);
        std::string v, kind, base;
        int world = 0, own = 0;
        if (!(f >> v >> world >> own >> kind >> base)) continue;
        Seen& s = seen[v];
        if (!ParseVersionName(v, &s.seq, &s.step)) continue;
        if (s.level3.kind == Level3Record::Kind::kUnknown && kind != "u") {
          s.level3 = ParseLevel3Record(kind == "c" ? "committed\n" : "absent " + base + "\n");
        }
        if (world > 0) {
          s.world_size = world;
          if (s.manifest_rank < 0) s.manifest_rank = k;
        }
        if (own != 0) s.own.insert(k);
        for (int p; f >> p;) s.holders[p].push_back(k);
      }
    }
    // Level 3's record: the versions its directory holds now (complete or
    // quarantined, of any step). Not listable: no level-2 version can be
    // judged, none is taken (level 3's own listing fails the restore).
    std::set<std::string> in_level3;
    std::vector<VersionInfo> all3;
    Status listed3 = ListVersions(env_, dir_, options_.max_restore_failures, &all3);
    for (const VersionInfo& v : all3) {
      if (v.status != VersionStatus::kIncomplete) in_level3.insert(v.name);
    }
    // Whether level 3 lost v (it was removed from the shared directory),
    // with the reason for the log.
    auto lost = [&](const std::string& v, const Seen& s, std::string* why) {
      if (!listed3.ok()) {
        *why = "level 3 (" + dir_ + ") cannot be listed: " + listed3.message();
        return true;
      }
      return Level3Lost(v, s.level3, in_level3, dir_, why);
    };
    std::vector<std::pair<uint64_t, std::string>> order;
    for (const auto& [v, s] : seen) order.emplace_back(s.seq, v);
    std::sort(order.rbegin(), order.rend());
    for (const auto& [seq, v] : order) {
      const Seen& s = seen[v];
      if (s.world_size != size_ || s.manifest_rank < 0) continue;
      if (std::find(quarantined.begin(), quarantined.end(), v) != quarantined.end()) continue;
      if (marked_out.count(v) != 0) continue;
      bool complete = true;
      std::vector<int> from(static_cast<size_t>(size_), -1), other(static_cast<size_t>(size_), -1);
      for (int k = 0; k < size_ && complete; ++k) {
        auto h = s.holders.find(k);
        const int partner = partner_[static_cast<size_t>(k)];
        const int holder = h == s.holders.end() ? -1
                           : std::find(h->second.begin(), h->second.end(), partner) != h->second.end()
                               ? partner
                               : h->second.front();
        if (s.own.count(k) != 0) {
          other[static_cast<size_t>(k)] = holder;
          continue;
        }
        if (holder < 0) complete = false;
        from[static_cast<size_t>(k)] = holder;
      }
      if (!complete) continue;
      std::string why;
      if (lost(v, s, &why)) {
        BATON_LOG(kCkpt, info) << "level 2: not restoring " << v << " from node-local copies: " << why
                               << " (removed there on purpose: a rollback)";
        continue;
      }
      if (seq < level3_newest_seq) {
        BATON_LOG(kCkpt, info) << "level 2's newest complete version " << v
                               << " is older than level 3's newest: restoring from level 3";
        break;
      }
      name = v;
      manifest_rank = s.manifest_rank;
      source = from;
      spare = other;
      break;
    }
  }
  BATON_RETURN_IF_ERROR(BcastString(comm_, &name));
  if (name.empty()) return Status::OK();
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(&manifest_rank, 1, MPI_INT, 0, comm_)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(source.data(), size_, MPI_INT, 0, comm_)));
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(spare.data(), size_, MPI_INT, 0, comm_)));

  // 3. The manifest, read by one rank that holds it, broadcast.
  std::string text;
  Status local;
  // The size is bounded before the read; the value limit is known on this
  // rank only, and every rank must parse alike, so the parse keeps its default.
  uint64_t reader_values = 0;
  if (rank_ == manifest_rank) {
    local = ReadManifestText(env_, local_.VersionDir(name), local_.VersionDir(name) + "/" + kManifestName, &text,
                             &reader_values);
  }
  Status agreed = Agree(comm_, local);
  if (agreed.ok()) {
    BATON_RETURN_IF_ERROR(BcastString(comm_, &text, manifest_rank));
    local = ParseManifestJson(text, &out->manifest);
    if (local.ok() && out->manifest.run_id != run_.run_id) {
      local = Status::InvalidArgument(log::kCkpt, local_.VersionDir(name) + " was written by run " +
                                                      out->manifest.run_id);
    }
    // Bound to its version: an older consistent version's files in this
    // version's directory must not restore as this step.
    uint64_t seq = 0;
    int64_t step = 0;
    if (local.ok() && ParseVersionName(name, &seq, &step)) {
      local = CheckManifestStep(out->manifest, step, name).Annotate(local_.VersionDir(name));
    }
    agreed = local;  // the same text everywhere: the same outcome
    // And to level 3's copy of the same version, when level 3 holds it:
    // both levels commit one manifest text (level2_save.cc), so a node-local
    // manifest that differs is not this version's (rank 0 reads level 3's).
    if (agreed.ok()) {
      Status same;
      if (rank_ == 0) same = SameAsLevel3(level3, name, text);
      agreed = Agree(comm_, same);
    }
  }
  out->name = name;
  out->source = source;
  out->spare = spare;
  out->text = std::move(text);
  out->failure = agreed;
  return Status::OK();
}

Status CheckpointerImpl::TryLevel2(const RestoreOptions& options, const std::vector<VersionInfo>& level3,
                                   const std::vector<std::string>& quarantined, RestoreResult* result,
                                   PhaseClock* clock, bool* restored) {
  *restored = false;
  if (!local_.on()) return Status::OK();
  Level2Choice choice;
  BATON_RETURN_IF_ERROR(ChooseLevel2(options, level3, quarantined, clock, &choice));
  const std::string& name = choice.name;
  const std::vector<int>& source = choice.source;
  if (name.empty()) return Status::OK();
  // Rank 0: when level 3 holds the version too, its restore attempt is
  // marked there (catalog.h), so that a version whose read kills the
  // processes is quarantined at both levels instead of crashing every
  // restart; a failure found in level 2 is level 2's copy's, never recorded
  // against level 3's (the mark ends with no failure).
  if (rank_ == 0) {
    for (const VersionInfo& v : level3) {
      if (v.name == name) BeginAttempt(v);
    }
    // Only in level 2: marked in rank 0's own node-local copy, when its
    // node holds the version (a wiped node has nowhere to mark).
    if (!attempt_) {
      std::vector<VersionInfo> local;
      if (ListVersions(env_, local_.root(), options_.max_restore_failures, &local).ok()) {
        for (const VersionInfo& v : local) {
          if (v.name == name && v.status != VersionStatus::kIncomplete) BeginAttempt(v);
        }
      }
    }
  }
  struct EndMark {
    CheckpointerImpl* self;
    ~EndMark() {
      if (self->attempt_) self->EndAttempt(nullptr);
    }
  } end_mark{this};
  const std::string vdir = local_.VersionDir(name);
  auto fall_back = [&](const Status& why) {
    uint64_t seq = 0;
    int64_t step = 0;
    ParseVersionName(name, &seq, &step);
    result->level2_fallback = SkippedVersion{vdir, step, why, /*counted=*/false};
    if (rank_ == 0) {
      BATON_LOG(kCkpt, warning) << "level 2: cannot restore " << name << " from node-local copies (" << why.message()
                                << "); trying level 3";
    }
    return Status::OK();
  };

  // The manifest against the registrations.
  if (!choice.failure.ok()) return fall_back(choice.failure);
  Manifest& m = choice.manifest;
  Status local;
  std::vector<int> index_of;
  bool with_state = false;
  local = CompareWithManifest(m, options.arrays, &index_of);
  if (local.ok()) local = CheckRankState(m, options, &with_state);
  Status agreed = Agree(comm_, local);  // the same text everywhere: the same outcome
  if (!agreed.ok()) return fall_back(agreed);
  clock->Lap("manifest");

  // 4. Shards whose own copy is gone, from the partner copies over MPI:
  // rank k's shard and index from from[k] (-1: none), written as k's own.
  auto fetch = [&](const std::vector<int>& from, uint64_t* received) {
    std::vector<FileMove> moves;
    for (int k = 0; k < size_; ++k) {
      if (from[static_cast<size_t>(k)] < 0) continue;
      const std::string f = ShardFileName(k);
      for (const std::string& n : {f, ShardIndexName(f)}) {
        moves.push_back(FileMove{from[static_cast<size_t>(k)], k, local_.PartnerDir(name) + "/" + n, vdir + "/" + n});
      }
    }
    if (moves.empty()) return Status::OK();
    Status made = from[static_cast<size_t>(rank_)] >= 0 ? env_->CreateDir(vdir, options_.dir_mode, /*exist_ok=*/true)
                                                         : Status::OK();
    BATON_RETURN_IF_ERROR(Agree(comm_, made));
    uint64_t got = 0;
    Status moved = ExchangeFiles(comm_, env_, moves, options_.file_mode, &got);
    *received += got;
    return Agree(comm_, moved);
  };
  uint64_t fetched = 0;
  agreed = fetch(source, &fetched);
  if (!agreed.ok()) return fall_back(agreed);
  clock->Lap("read");

  // 5. The rows, from this node's copies.
  uint64_t bytes = 0;
  std::string state;
  Status read;
  agreed = ReadAndAgree(2, vdir, m, index_of, with_state, clock, &bytes, &state, &read);
  if (!agreed.ok()) {
    // Own copies that failed (a checksum, a truncated file: the node's
    // disk, not the version) are replaced by their partner copies when
    // every failed rank has one, and read again; the rows of the ranks
    // that read well stay as they are.
    int mine = read.ok() ? 0 : 1;
    std::vector<int> failed(static_cast<size_t>(size_));
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Allgather(&mine, 1, MPI_INT, failed.data(), 1, MPI_INT, comm_)));
    std::vector<int> from(static_cast<size_t>(size_), -1);
    bool covered = true;
    std::string who;
    for (int k = 0; k < size_; ++k) {
      if (failed[static_cast<size_t>(k)] == 0) continue;
      from[static_cast<size_t>(k)] = choice.spare[static_cast<size_t>(k)];
      if (from[static_cast<size_t>(k)] < 0) covered = false;
      who += (who.empty() ? "" : ", ") + std::to_string(k);
    }
    if (!covered) return fall_back(agreed);
    if (rank_ == 0) {
      BATON_LOG(kCkpt, warning) << "level 2: the own copies of rank(s) " << who << " of " << name
                                << " failed (" << agreed.message() << "); reading their partner copies";
    }
    agreed = fetch(from, &fetched);
    if (!agreed.ok()) return fall_back(agreed);
    read = Status::OK();
    Manifest again;  // ReadMyRows loaded shard indexes into m
    if (mine != 0) {
      read = ParseManifestJson(choice.text, &again);
      const ReadPass pass = verify_before_write_ ? ReadPass::kVerifyOnly : ReadPass::kDirect;
      if (read.ok()) read = ReadMyRows(2, vdir, again, index_of, with_state, clock, &bytes, &state, pass);
    }
    clock->Lap("read");
    agreed = Agree(comm_, read, nullptr, Code::kCorruption);
    clock->Lap("agree");
    if (!agreed.ok()) return fall_back(agreed);
    if (verify_before_write_) {  // every rank verified (the first read or the partner copy's): now written
      bytes = 0;
      agreed = CopyVerifiedAndAgree(2, vdir, mine != 0 ? again : m, index_of, clock, &bytes, nullptr);
      if (!agreed.ok()) return fall_back(agreed);
    }
  }
  BATON_RETURN_IF_ERROR(
      FinishRestore(2, vdir, m, index_of, with_state, std::move(state), bytes, fetched, clock, result));
  *restored = true;
  return Status::OK();
}

}  // namespace baton::ckpt
