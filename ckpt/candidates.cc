// Which version a restore tries next (ckpt/checkpointer_impl.h), and
// ReadMetadata, which asks the same question without reading shards.
//
// Rank 0 lists the versions and reads the manifests; every other rank
// learns the outcome from one broadcast per version tried, so that every
// rank walks the same versions and returns the same RestoreResult.
//
// What a failure to read a manifest means:
//   corruption (counted toward quarantine, recorded beside the version): a
//     manifest that is not a regular file, larger than any baton writes, or
//     that does not parse;
//   newer (a hard error, no fallback): a manifest format newer than this
//     baton reads; restoring an older version instead would silently go back
//     in time;
//   gone (skipped, not recorded): the manifest is no longer there (the
//     version was removed since the listing);
//   transient (a hard error, no fallback, not recorded): anything else
//     (I/O errors, stale handles, permissions): the version may well be
//     good, and restoring an older one would go back in time for an error
//     that a requeue may not meet again.
//
// The attempt mark (BeginAttempt) counts a process that dies while it
// reads the version; a stop signal (SIGTERM of a preemption or a time
// limit, the stop signal) after which every rank still answers its
// heartbeats takes the mark away (ckpt/stop_watch.h), since the kill that
// follows is not the version's doing.
#include <mpi.h>

#include <climits>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/printable.h"
#include "baton/log.h"
#include "baton/runtime.h"
#include "ckpt/agreement.h"
#include "ckpt/checkpointer_impl.h"
#include "ckpt/manifest_index.h"
#include "ckpt/restore_failures.h"
#include "ckpt/stop_watch.h"
#include "mpi_runtime/mpi_check.h"

namespace baton::ckpt {
namespace {

// Rank 0: the manifest of v, read and parsed; failures classified as above.
Status LoadManifest(fs::Env* env, const VersionInfo& v, ManifestParseCache* parses, std::string* text, Manifest* m) {
  std::string path;
  Status s = ResolveInside(env, v.path, kManifestName, &path);
  if (s.code() == Code::kInvalidArgument) return Status::Corruption(log::kCkpt, s.message());
  BATON_RETURN_IF_ERROR(s);
  uint64_t max_values = 0;
  s = ReadManifestText(env, v.path, path, text, &max_values);
  // ReadManifestText's InvalidArgument: larger than the limit, or not a regular file.
  if (s.code() == Code::kInvalidArgument) return Status::Corruption(log::kCkpt, s.message());
  BATON_RETURN_IF_ERROR(s);
  // kCorruption, or kInvalidArgument for a newer format.
  BATON_RETURN_IF_ERROR(parses->Parse(*text, m, max_values).Annotate(path));
  // Its step is its directory's (an edited step, another version's files).
  BATON_RETURN_IF_ERROR(CheckManifestStep(*m, v.step, v.name).Annotate(path));
  // Sizes bounded by the files before anyone allocates by them (a forged manifest falls back as damage does).
  s = CheckArrayBytesWithinFiles(env, v.path, *m);
  return s.code() == Code::kCorruption ? s : s.Annotate(path);
}

}  // namespace

Status CheckpointerImpl::CheckRestoreOptions(const char* what, const RestoreOptions& o, std::string* call) const {
  *call = std::string(what) + "(step=" + (o.step ? std::to_string(*o.step) : "newest") + ", arrays=";
  for (size_t i = 0; i < o.arrays.size(); ++i) *call += (i ? "," : "") + o.arrays[i];
  *call += o.arrays.empty() ? "all" : "";
  *call += std::string(", drop_rank_state_on_resize=") + (o.drop_rank_state_on_resize ? "true" : "false") +
           ", from_level=" + std::to_string(o.from_level);
  // Agreed with the rest of the call: every rank pins the same version.
  if (!o.version.empty()) *call += ", version=" + Printable(o.version);
  if (o.as_restore) *call += ", as_restore=true";
  if (!o.older_than.empty()) *call += ", older_than=" + Printable(o.older_than);
  if (o.verify_before_write) *call += ", verify_before_write=true";
  *call += ")";
  if (o.from_level != 0 && o.from_level != 3) {
    return Status::InvalidArgument(log::kCkpt, *call + ": from_level " + std::to_string(o.from_level) +
                                                   " (0: the fastest level holding the version, 3: the shared "
                                                   "directory only)");
  }
  if (o.step && *o.step < 0) {
    return Status::InvalidArgument(log::kCkpt, *call + ": step " + std::to_string(*o.step) + " is negative");
  }
  for (const auto& [field, name] : {std::pair<const char*, const std::string*>{"version", &o.version},
                                    {"older_than", &o.older_than}}) {
    uint64_t seq = 0;
    int64_t step = 0;
    if (!name->empty() && !ParseVersionName(*name, &seq, &step)) {
      return Status::InvalidArgument(log::kCkpt, *call + ": " + field + " '" + Printable(*name) +
                                                     "' is not a version's name (such as v00000012-s400)");
    }
  }
  // A set, not a scan of the names before each: a restore of 5,000 arrays compared 12.5 million pairs.
  std::unordered_set<std::string_view> named;
  named.reserve(o.arrays.size());
  for (const std::string& name : o.arrays) {
    if (arrays_.count(name) == 0) {
      return Status::InvalidArgument(log::kCkpt, *call + ": array " + name + " is not registered");
    }
    if (!named.insert(name).second) {
      return Status::InvalidArgument(log::kCkpt, *call + ": array " + name + " is named twice");
    }
  }
  return Status::OK();
}

bool Selects(const RestoreOptions& o, const std::string& name) {
  if (!o.version.empty() && name != o.version) return false;
  if (o.older_than.empty()) return true;
  uint64_t seq = 0, limit = 0;
  int64_t step = 0;
  // Both parse: the name was listed, older_than was checked (CheckRestoreOptions).
  return ParseVersionName(name, &seq, &step) && ParseVersionName(o.older_than, &limit, &step) && seq < limit;
}

Status CheckpointerImpl::ListCandidates(const RestoreOptions& o, std::vector<VersionInfo>* candidates,
                                        int* quarantined, std::vector<std::string>* quarantined_names,
                                        std::string* step_missing) {
  std::vector<VersionInfo> versions;
  BATON_RETURN_IF_ERROR(ListVersions(env_, dir_, options_.max_restore_failures, &versions));
  int of_step = 0;
  std::string newest;
  for (const VersionInfo& v : versions) {
    if (v.status == VersionStatus::kIncomplete) continue;
    if (!Selects(o, v.name)) continue;
    newest = std::to_string(v.step);
    if (o.step && v.step != *o.step) continue;
    ++of_step;
    if (v.status == VersionStatus::kComplete) candidates->push_back(v);
    if (v.status == VersionStatus::kQuarantined) {
      ++*quarantined;
      if (quarantined_names != nullptr) quarantined_names->push_back(v.name);
      BATON_LOG(kCkpt, warning) << "skipping " << v.path << ": quarantined after " << v.restore_failures
                                << " failed restores";
    }
  }
  if (!o.version.empty() && of_step == 0) {
    Status none = Status::NotFound(log::kCkpt, "no committed version " + Printable(o.version) +
                                                   (o.step ? " of step " + std::to_string(*o.step) : "") + " in " +
                                                   dir_);
    if (step_missing == nullptr || !local_.on() || o.from_level == 3) return none;
    *step_missing = none.message();
  } else if (o.step && of_step == 0) {
    Status none = Status::NotFound(log::kCkpt, "no committed version of step " + std::to_string(*o.step) +
                                                   (o.older_than.empty() ? "" : " older than " + Printable(o.older_than)) +
                                                   " in " + dir_ +
                                                   (newest.empty() ? " (it holds none)" : " (the newest is step " + newest + ")"));
    // Level 2 may hold a step level 3 does not (shared_every > 1, or level
    // 3 not reached yet): the caller asks level 2 before it fails.
    if (step_missing == nullptr || !local_.on() || o.from_level == 3) return none;
    *step_missing = none.message();
  }
  return Status::OK();
}

void CheckpointerImpl::BeginAttempt(const VersionInfo& v) {
  attempt_ = Attempt{v, ""};
  if (!read_only_.empty()) return;  // nothing can be marked: no quarantine either
  if (Runtime::stop_signal_received()) {
    BATON_LOG(kCkpt, info) << "a stop was requested before the restore of " << v.path
                           << ": the attempt is not marked (a kill now is a preemption, not a failed restore)";
    return;
  }
  std::string token;
  Status s = BeginRestoreAttempt(env_, v, &token);
  if (!s.ok()) {
    BATON_LOG(kCkpt, warning) << "could not mark the restore attempt of " << v.path
                              << " (a crash while reading it will not be counted): " << s;
    return;
  }
  attempt_->token = token;
  // Until EndAttempt: a stop signal takes the mark away (on the watch's
  // thread; EndAttempt joins it before it reads attempt_ again).
  // A rank that died before the signal (the launcher's SIGTERM after a
  // crash) is silent a few heartbeat intervals later; after a preemption's
  // SIGTERM every rank still answers. Without heartbeats (at more than one
  // rank) the two look alike: the mark stays, so a version that crashes
  // every restore is still quarantined.
  const RuntimeOptions& ro = runtime_.options();
  const bool can_tell = size_ == 1 || ro.heartbeats;
  const double settle = size_ == 1 ? 0 : 3 * ro.heartbeat_interval + 0.5;
  auto every_rank_answers = [this, can_tell] { return can_tell && runtime_.silent_ranks().empty(); };
  attempt_watch_.Arm([this] {
    Attempt& a = *attempt_;
    Status ended = EndRestoreAttempt(env_, a.version, a.token, nullptr);
    a.token.clear();  // a corruption found later is still recorded (RecordRestoreFailure)
    if (ended.ok()) {
      BATON_LOG(kCkpt, warning) << "a stop was requested while restoring " << a.version.path
                                << ": its attempt mark is removed (a kill now is a preemption, not a failed restore)";
    } else {
      BATON_LOG(kCkpt, warning) << "a stop was requested while restoring " << a.version.path
                                << ", but its attempt mark could not be removed (a kill now counts toward its "
                                   "quarantine): "
                                << ended;
    }
  }, settle, every_rank_answers);
}

void CheckpointerImpl::EndAttempt(const std::string* failure, Status* recorded) {
  attempt_watch_.Disarm();  // waited for: it touches attempt_ no more
  if (recorded != nullptr) *recorded = Status::OK();
  if (!attempt_) return;
  const Attempt a = std::move(*attempt_);
  attempt_.reset();
  if (!read_only_.empty()) {
    // Nothing is written here: the caller says the failure is not counted
    // (its reason ends with this), and so does its log line.
    if (failure != nullptr && recorded != nullptr)
      *recorded = Status::Unavailable(log::kCkpt, dir_ + " is read-only (" + read_only_ + "): nothing is recorded there");
    return;
  }
  Status s = !a.token.empty()     ? EndRestoreAttempt(env_, a.version, a.token, failure)
             : failure != nullptr ? RecordRestoreFailure(env_, a.version, *failure)
                                  : Status::OK();  // no mark was written: nothing to end
  if (!s.ok()) {
    BATON_LOG(kCkpt, warning) << "could not " << (failure ? "record the failure of " : "end the restore attempt of ")
                              << a.version.path << ": " << s;
  }
  if (recorded != nullptr) *recorded = s;
}

std::string NotRecorded(const Status& why) {
  return " (its failure could not be recorded toward its quarantine, so it is not counted: " + why.message() + ")";
}

Status CheckpointerImpl::NextCandidate(std::vector<VersionInfo>* candidates, Record record, Candidate* out,
                                       PhaseClock* clock, Listing* listing) {
  *out = Candidate();
  auto lap = [clock](const char* phase) {
    if (clock != nullptr) clock->Lap(phase);
  };
  if (rank_ == 0 && listing != nullptr && !listing->status.ok()) candidates->clear();
  if (rank_ == 0 && !candidates->empty()) {
    const VersionInfo v = candidates->back();
    candidates->pop_back();
    out->name = v.name;
    out->step = v.step;
    // Marked before the manifest is read: parsing a hostile one may be
    // what kills the process.
    if (record == Record::kAttempt) BeginAttempt(v);
    lap("mark");
    Manifest m;
    Status s = LoadManifest(env_, v, &manifest_parses_, &out->text, &m);
    if (s.ok() && !m.run_id.empty() && m.run_id != run_.run_id) {
      // Another run's version (copied in, or written by a baton that took
      // no lock): not this run's state, not damaged either.
      out->kind = Candidate::kSkipped;
      out->failure = Status::InvalidArgument(log::kCkpt, v.path + " was written by run " + m.run_id +
                                                             "; this directory's run is " + run_.run_id);
      out->text.clear();
    } else if (s.ok()) {
      out->kind = Candidate::kManifest;  // the attempt stays open while the shards are read
    } else if (s.code() == Code::kCorruption || s.code() == Code::kNotFound) {
      // Damaged (counted), or removed since the listing (nothing to count).
      out->kind = Candidate::kSkipped;
      out->failure = s;
      out->counted = s.code() == Code::kCorruption;
      out->text.clear();
    } else if (s.code() == Code::kInvalidArgument) {
      out->kind = Candidate::kHardError;  // a newer format
      out->failure = s;
    } else {
      // Transient (EIO, ESTALE, EACCES, ...): the bytes are not shown to be
      // bad, so no older version is taken for it.
      out->kind = Candidate::kHardError;
      out->failure = TransientRestoreError(s, v.path);
    }
    if (record == Record::kFailures && out->counted) attempt_ = Attempt{v, ""};  // no mark: a failure to record
    if (record != Record::kNothing && out->kind != Candidate::kManifest) {
      const std::string reason = out->failure.message();
      Status ended;
      EndAttempt(out->counted ? &reason : nullptr, &ended);
      if (out->counted && !ended.ok()) {
        out->counted = false;
        out->failure = MakeStatus(out->failure.code(), reason + NotRecorded(ended));
      }
    }
  }
  lap("manifest");
  // Two broadcasts per version tried: the head (kind, step, code, counted,
  // the texts' lengths; the listing's code and counts), then the texts in
  // one (the manifest, then the name, the failure's message, the
  // listing's message). On a node with more ranks than idle cores each
  // collective round costs a wait for a descheduled rank, whatever its
  // bytes: one broadcast per field was five rounds.
  if (out->kind != Candidate::kManifest) out->text.clear();  // only a manifest to read goes out
  std::string message;
  if (out->kind == Candidate::kSkipped || out->kind == Candidate::kHardError) message = out->failure.message();
  const std::string listed = listing != nullptr ? listing->status.message() : std::string();
  long long head[11] = {out->kind,
                        out->step,
                        static_cast<long long>(out->failure.code()),
                        out->counted ? 1 : 0,
                        static_cast<long long>(out->text.size()),
                        static_cast<long long>(out->name.size()),
                        static_cast<long long>(message.size()),
                        static_cast<long long>(listed.size()),
                        listing != nullptr ? static_cast<long long>(listing->status.code()) : 0,
                        listing != nullptr ? listing->quarantined : 0,
                        listing != nullptr ? listing->world_rank : 0};
  BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(head, 11, MPI_LONG_LONG, 0, comm_)));
  out->kind = static_cast<Candidate::Kind>(head[0]);
  out->step = head[1];
  out->counted = head[3] != 0;
  const long long total = head[4] + head[5] + head[6] + head[7];
  if (total > INT_MAX) {
    return Status::Internal(log::kCkpt, "a manifest and names of " + std::to_string(total) + " bytes to broadcast");
  }
  std::string& texts = out->text;  // the manifest first: it is not copied
  if (rank_ == 0) texts += out->name + message + listed;
  texts.resize(static_cast<size_t>(total));
  if (total > 0) {
    BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(texts.data(), static_cast<int>(total), MPI_CHAR, 0, comm_)));
  }
  size_t at = static_cast<size_t>(head[4]);
  auto take = [&](long long n) {
    std::string t = texts.substr(at, static_cast<size_t>(n));
    at += static_cast<size_t>(n);
    return t;
  };
  out->name = take(head[5]);
  message = take(head[6]);
  const std::string listed_here = take(head[7]);
  texts.resize(static_cast<size_t>(head[4]));
  if (rank_ != 0 && (out->kind == Candidate::kSkipped || out->kind == Candidate::kHardError)) {
    out->failure = MakeStatus(static_cast<Code>(head[2]), message);
  }
  if (rank_ != 0 && listing != nullptr) {
    listing->status = head[8] == 0 ? Status::OK() : MakeStatus(static_cast<Code>(head[8]), listed_here);
    listing->quarantined = static_cast<int>(head[9]);
    listing->world_rank = head[10];
  }
  lap("bcast");
  return Status::OK();
}

Status CheckpointerImpl::ReadMetadataNow(const RestoreOptions& options, std::optional<CheckpointMetadata>* out) {
  out->reset();
  std::string call;
  Status args = CheckRestoreOptions("ReadMetadata", options, &call);
  BATON_RETURN_IF_ERROR(AgreeOnCall(call, args));
  std::vector<VersionInfo> candidates;
  int quarantined = 0;
  std::vector<std::string> quarantined_names;
  Status local;
  std::string step_missing;
  if (rank_ == 0) local = ListCandidates(options, &candidates, &quarantined, &quarantined_names, &step_missing);
  BATON_RETURN_IF_ERROR(Agree(comm_, local).Annotate(call + " in " + dir_));
  BATON_RETURN_IF_ERROR(BcastString(comm_, &step_missing));
  if (options.as_restore) BATON_RETURN_IF_ERROR(BATON_MPI_CHECK(MPI_Bcast(&quarantined, 1, MPI_INT, 0, comm_)));
  auto metadata_of = [&](const Manifest& m, const std::string& vdir) {
    CheckpointMetadata md;
    md.step = m.step;
    md.version_path = vdir;
    md.world_size = m.world_size;
    md.time = m.time;
    md.user_blob_bytes = m.user_blob.size();
    md.user_blob = m.user_blob;
    for (const ArrayMeta& a : m.arrays) {
      if (a.name == kRankStateName) {
        md.has_rank_state = true;
        continue;
      }
      md.arrays.push_back(CheckpointArray{a.name, a.dtype, a.shape, a.replicated});
    }
    return md;
  };
  // The version Restore would take from level 2 (ckpt/level_choice.cc).
  if (local_.on() && options.from_level != 3) {
    Level2Choice choice;
    PhaseClock clock;
    std::vector<CheckpointStats::Phase> phases;
    clock.Start(&phases, {"list"});
    BATON_RETURN_IF_ERROR(ChooseLevel2(options, candidates, quarantined_names, &clock, &choice));
    if (!choice.name.empty() && choice.failure.ok()) {
      *out = metadata_of(choice.manifest, local_.VersionDir(choice.name));
      return Status::OK();
    }
  }
  if (!step_missing.empty()) return Status::NotFound(log::kCkpt, step_missing).Annotate(call);
  std::vector<SkippedVersion> skipped;
  for (;;) {
    Candidate c;
    BATON_RETURN_IF_ERROR(
        NextCandidate(&candidates, options.as_restore ? Record::kFailures : Record::kNothing, &c));
    if (c.kind == Candidate::kNone) {
      // As Restore ends (restore.cc): nothing left after failures is not a first run.
      if (options.as_restore && (!skipped.empty() || quarantined > 0)) {
        return NoVersionRestored(options, skipped, quarantined);
      }
      return Status::OK();
    }
    if (c.kind == Candidate::kHardError) return c.failure;
    if (c.kind == Candidate::kSkipped) {
      // Counted only where recorded (as_restore); c.counted alone says a restore would count it.
      skipped.push_back(SkippedVersion{dir_ + "/" + c.name, c.step, c.failure, c.counted && options.as_restore});
      continue;
    }
    Manifest m;
    BATON_RETURN_IF_ERROR(manifest_parses_.Parse(c.text, &m));  // rank 0 parsed the same text
    *out = metadata_of(m, dir_ + "/" + c.name);
    (*out)->skipped = std::move(skipped);
    return Status::OK();
  }
}

}  // namespace baton::ckpt
