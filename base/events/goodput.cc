#include "base/events/goodput.h"

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

namespace baton::events {
namespace {

struct LaunchEvents {
  std::vector<const Event*> all;
  std::map<int, std::vector<const Event*>> steps_by_rank, saves_by_rank;
};

// The rank with the most records in `by_rank` (the lowest on a tie), or -1.
int BusiestRank(const std::map<int, std::vector<const Event*>>& by_rank) {
  int best = -1;
  size_t most = 0;
  for (const auto& [rank, list] : by_rank)
    if (list.size() > most) {
      best = rank;
      most = list.size();
    }
  return best;
}

bool EarlierT(const Event* a, const Event* b) { return a->t < b->t; }

// How the step of launch `l` ended as its batch script saw it: the first
// step_end record of its job from its start up to `until` (the next launch's
// start), or null.
const Event* StepEndOf(const std::vector<const Event*>& step_ends, const LaunchSummary& l, double until) {
  const Event* found = nullptr;
  for (const Event* e : step_ends) {
    if (e->t < l.start || e->t > until) continue;
    if (!e->job.empty() && !l.job.empty() && e->job != l.job) continue;
    if (found != nullptr && found->t <= e->t) continue;
    found = e;
  }
  return found;
}

// The cause the ranks' logs gave (`from_logs`), corrected by the step_end
// record: a node lost outranks what the ranks saw (a deadline, a silent
// peer: the effect of the node's death); an exit alone names only a launch
// whose ranks left no word.
std::string CauseWithStepEnd(const std::string& from_logs, const Event& step_end) {
  if (!step_end.lost.empty()) return "node failure";
  if (from_logs == "unknown" && step_end.exit && *step_end.exit != 0) return "exit " + std::to_string(*step_end.exit);
  return from_logs;
}

}  // namespace

std::string Interruption::Detail() const {
  std::string d;
  for (const auto& [host, why] : lost) d += (d.empty() ? "" : ", ") + host + (why.empty() ? "" : " (" + why + ")");
  if (step_exit) d += (d.empty() ? "" : "; ") + std::string("srun exit ") + std::to_string(*step_exit);
  if (!srun_said.empty()) d += (d.empty() ? "" : ": ") + srun_said;
  return d;
}

Report Analyze(const std::vector<Event>& events) {
  Report r;
  if (events.empty()) return r;
  std::map<std::string, LaunchEvents> by_launch;
  std::vector<const Event*> step_ends;  // the batch script's: no launch of their own
  for (const Event& e : events) {
    if (e.kind == "step_end") {
      step_ends.push_back(&e);
      continue;
    }
    // `baton run`'s record of a launch and its cause: the batch side's, no
    // rank's launch (the ranks' own `start` records make the launches).
    if (e.kind == "step_launch") continue;
    LaunchEvents& l = by_launch[e.launch];
    l.all.push_back(&e);
    if (e.kind == "step") l.steps_by_rank[e.rank].push_back(&e);
    if (e.kind == "save") l.saves_by_rank[e.rank].push_back(&e);
  }

  struct Built {
    LaunchSummary s;
    const LaunchEvents* ev;
  };
  std::vector<Built> built;
  for (auto& [key, l] : by_launch) {
    std::sort(l.all.begin(), l.all.end(), EarlierT);
    for (auto& [rank, list] : l.steps_by_rank) std::sort(list.begin(), list.end(), EarlierT);
    for (auto& [rank, list] : l.saves_by_rank) std::sort(list.begin(), list.end(), EarlierT);
    LaunchSummary s;
    s.key = key;
    s.start = std::numeric_limits<double>::infinity();
    s.end = l.all.back()->t;
    int starts = 0;
    for (const Event* e : l.all) {
      if (e->kind != "start") continue;
      ++starts;
      s.start = std::min(s.start, e->t);
      if (s.job.empty()) s.job = e->job;
      s.restart = std::max(s.restart, e->restart);
      s.world = std::max(s.world, e->world);
      if (!e->hosts.empty() && s.hosts.empty()) s.hosts = e->hosts;
    }
    if (starts == 0) s.start = l.all.front()->t;
    s.world = std::max(s.world, starts);
    s.rank = BusiestRank(l.steps_by_rank);
    if (s.rank >= 0) {
      const auto& steps = l.steps_by_rank.at(s.rank);
      s.steps = static_cast<int64_t>(steps.size());
      s.first_step = steps.front()->step;
      s.last_step = steps.back()->step;
    }
    int save_rank = s.rank >= 0 && l.saves_by_rank.count(s.rank) ? s.rank : BusiestRank(l.saves_by_rank);
    if (save_rank >= 0)
      for (const Event* e : l.saves_by_rank.at(save_rank)) {
        ++s.saves;
        s.stall += e->dur;
      }
    // The restore: the counted rank's records before its first step (else
    // the last rank's that wrote any). One restore can write several:
    // Python's restore(state) restores the version marker, plans, then the
    // tensors (two records a pass). Its time is their span, from the first
    // call's start to the last one's end (the planning between them
    // included); the step and level are the last one's.
    int restore_rank = -1;
    for (const Event* e : l.all)
      if (e->kind == "restore" && (restore_rank < 0 || restore_rank != s.rank)) restore_rank = e->rank;
    const double first_step_t = s.rank >= 0 && restore_rank == s.rank ? l.steps_by_rank.at(s.rank).front()->t
                                                                       : std::numeric_limits<double>::infinity();
    const Event *first_restore = nullptr, *last_restore = nullptr;
    for (const Event* e : l.all)
      if (e->kind == "restore" && e->rank == restore_rank && e->t <= first_step_t) {
        if (first_restore == nullptr) first_restore = e;
        last_restore = e;
      }
    if (last_restore != nullptr) {
      s.restored = last_restore->step >= 0;
      s.restored_step = last_restore->step;
      s.restore_level = last_restore->level;
      s.restore_seconds = (last_restore->t - first_restore->t) + first_restore->dur;
      s.restore_records = 0;
      for (const Event* e : l.all)
        if (e->kind == "restore" && e->rank == restore_rank && e->t <= first_step_t) ++s.restore_records;
    }
    const Event* first_end = nullptr;
    for (const Event* e : l.all)
      if (e->kind == "stop" || e->kind == "failure") {
        first_end = e;
        break;
      }
    if (first_end != nullptr) {
      s.ended = first_end->kind;
    } else {
      s.ended = "unknown";
      for (const Event* e : l.all)
        if (e->kind == "end") s.ended = "end";
    }
    built.push_back({std::move(s), &l});
  }
  std::sort(built.begin(), built.end(), [](const Built& a, const Built& b) { return a.s.start < b.s.start; });
  if (built.empty()) return r;  // only the batch script's records

  // Productive time: each distinct step once, its last computation.
  std::unordered_map<int64_t, const Event*> last_of_step;
  r.start = std::numeric_limits<double>::infinity();
  r.end = -std::numeric_limits<double>::infinity();
  for (const Built& b : built) {
    r.start = std::min(r.start, b.s.start);
    r.end = std::max(r.end, b.s.end);
    r.saves += b.s.saves;
    r.stall += b.s.stall;
    if (b.s.rank < 0) continue;
    for (const Event* e : b.ev->steps_by_rank.at(b.s.rank)) {
      ++r.computed;
      const Event*& last = last_of_step[e->step];
      if (last == nullptr || e->t > last->t) last = e;
    }
  }
  for (const auto& [step, e] : last_of_step) {
    r.productive += e->dur;
    r.first_step = r.first_step < 0 ? step : std::min(r.first_step, step);
    r.last_step = std::max(r.last_step, step);
  }
  r.steps = static_cast<int64_t>(last_of_step.size());
  r.computed_twice = r.computed - r.steps;
  r.wall = r.end - r.start;
  r.goodput = r.wall > 0 ? r.productive / r.wall : 0;

  for (size_t i = 1; i < built.size(); ++i) {
    const Built& before = built[i - 1];
    const Built& after = built[i];
    Interruption x;
    x.before = i - 1;
    x.after = i;
    x.cause = before.s.ended;
    x.last_progress = before.s.start;
    for (const auto& [rank, steps] : before.ev->steps_by_rank)
      if (steps.back()->t >= x.last_progress) {
        x.last_progress = steps.back()->t;
        x.last_step = steps.back()->step;
      }
    x.detected = before.s.end;
    for (const Event* e : before.ev->all) {
      if (e->kind == "failure") x.failures.push_back({e->rank, e->t, e->what});
      if ((e->kind == "failure" || e->kind == "stop") && e->t < x.detected) x.detected = e->t;
    }
    x.started = after.s.start;
    x.restored = x.started;
    x.restore_started = x.started;
    const double first_t = after.s.rank >= 0 ? after.ev->steps_by_rank.at(after.s.rank).front()->t
                                             : std::numeric_limits<double>::infinity();
    bool any_restore = false;
    for (const Event* e : after.ev->all)  // in the order of their t (their end)
      if (e->kind == "restore" && (e->rank == after.s.rank || after.s.rank < 0) && e->t <= first_t) {
        // The earliest call's start (its end less its dur), never before the
        // launch's start: a record's clock and dur come from one process.
        const double began = std::max(x.started, e->t - std::max(0.0, e->dur));
        x.restore_started = any_restore ? std::min(x.restore_started, began) : began;
        any_restore = true;
        x.restored = e->t;
      }
    x.resumed = x.restored;
    if (after.s.rank >= 0) {
      const Event* first = after.ev->steps_by_rank.at(after.s.rank).front();
      x.resumed = first->t;
      x.resumed_step = first->step;
    }
    if (const Event* step_end = StepEndOf(step_ends, before.s, after.s.start); step_end != nullptr) {
      x.step_exit = step_end->exit;
      x.srun_said = step_end->said;
      x.lost = step_end->lost;
      x.cause = CauseWithStepEnd(x.cause, *step_end);
    }
    r.interruptions.push_back(std::move(x));
  }
  // Each launch's end with its cause: where the ranks' logs just stop (srun
  // SIGKILLed them after a node failure), the batch script's step_end record
  // says why; the last launch has no interruption after it, so its own
  // record is looked up here.
  for (size_t i = 0; i < built.size(); ++i) {
    LaunchSummary& s = built[i].s;
    if (i + 1 < built.size()) {
      s.ended = r.interruptions[i].cause;
    } else if (const Event* e = StepEndOf(step_ends, s, std::numeric_limits<double>::infinity()); e != nullptr) {
      s.ended = CauseWithStepEnd(s.ended, *e);
    }
  }
  for (Built& b : built) r.launches.push_back(std::move(b.s));
  return r;
}

}  // namespace baton::events
