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

}  // namespace

Report Analyze(const std::vector<Event>& events) {
  Report r;
  if (events.empty()) return r;
  std::map<std::string, LaunchEvents> by_launch;
  for (const Event& e : events) {
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
    // The restore: the counted rank's, else the last of any rank's.
    const Event* restore = nullptr;
    for (const Event* e : l.all)
      if (e->kind == "restore" && (restore == nullptr || restore->rank != s.rank)) restore = e;
    if (restore != nullptr) {
      s.restored = restore->step >= 0;
      s.restored_step = restore->step;
      s.restore_level = restore->level;
      s.restore_seconds = restore->dur;
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
    for (const Event* e : after.ev->all)
      if (e->kind == "restore" && (e->rank == after.s.rank || after.s.rank < 0)) x.restored = e->t;
    x.resumed = x.restored;
    if (after.s.rank >= 0) {
      const Event* first = after.ev->steps_by_rank.at(after.s.rank).front();
      x.resumed = first->t;
      x.resumed_step = first->step;
    }
    r.interruptions.push_back(std::move(x));
  }
  for (Built& b : built) r.launches.push_back(std::move(b.s));
  return r;
}

}  // namespace baton::events
