#include "ckpt/writer_lock.h"

#include <regex>

#include "ckpt/run.h"

namespace baton::ckpt {

std::string HolderText(const WriterIdentity& who, const std::string& since) {
  return "pid " + std::to_string(who.pid) + " on " + who.host + ", job " + (who.job.empty() ? "-" : who.job) +
         ", step " + (who.step.empty() ? "-" : who.step) + ", since " + since;
}

bool ParseHolderText(const std::string& text, WriterIdentity* who) {
  // The step is absent from the texts of earlier versions of baton.
  static const std::regex kText(R"(pid ([0-9]+) on ([^,]+), job ([^,]+)(, step ([^,]+))?, since .*)");
  std::smatch m;
  if (!std::regex_match(text, m, kText)) return false;
  *who = WriterIdentity();
  who->pid = std::stol(m[1].str());
  who->host = m[2].str();
  who->job = m[3].str() == "-" ? "" : m[3].str();
  who->step = m[5].matched && m[5].str() != "-" ? m[5].str() : "";
  return true;
}

Status AcquireWriterLock(fs::Env* env, const std::string& dir, mode_t mode, const WriterIdentity& me,
                         const std::string& since, const JobLifeFn& job_life, std::unique_ptr<fs::FileLock>* lock,
                         std::string* how) {
  const std::string path = dir + "/" + kWriterLockName;
  std::unique_ptr<fs::FileLock> held;
  BATON_RETURN_IF_ERROR(env->LockFile(path, mode, HolderText(me, since), &held));
  const fs::LockReach reach = held->reach();
  *how = std::string("flock reaches ") + fs::LockReachName(reach) + " (" + held->reach_reason() + ")";
  if (reach == fs::LockReach::kCluster) {
    *lock = std::move(held);
    return Status::OK();
  }
  const std::string previous = held->previous_holder();
  if (!previous.empty()) {
    WriterIdentity was;
    const bool parsed = ParseHolderText(previous, &was);
    const std::string where = path + " (" + *how + ")";
    if (!parsed) {
      return Status::Unavailable("ckpt", where + " holds " + previous +
                                             ", not a holder text baton can check: remove the file if no writer uses " +
                                             dir);
    }
    const bool same_node_flock = reach == fs::LockReach::kNode && was.host == me.host;
    const bool earlier_run = !was.job.empty() && was.job == me.job && was.step == me.step;
    if (!same_node_flock && !earlier_run) {
      if (was.job.empty()) {
        return Status::Unavailable("ckpt", where + " is held by " + previous +
                                               ", outside Slurm: its end cannot be checked; remove the file if that "
                                               "writer is gone");
      }
      if (was.job == me.job) {
        return Status::Unavailable("ckpt", where + " is held by " + previous + ", another step of this job");
      }
      const JobLife life = job_life ? job_life(was.job) : JobLife::kUnknown;
      if (life == JobLife::kRunning) {
        return Status::Unavailable("ckpt", where + " is held by " + previous + ", whose job still runs");
      }
      if (life == JobLife::kUnknown) {
        return Status::Unavailable("ckpt", where + " is held by " + previous +
                                               ", and Slurm cannot say whether job " + was.job +
                                               " still runs; remove the file if it has ended");
      }
    }
    *how += "; replaced the text of a holder that ended (" + previous + ")";
  }
  BATON_RETURN_IF_ERROR(held->Claim());
  *lock = std::move(held);
  return Status::OK();
}

}  // namespace baton::ckpt
