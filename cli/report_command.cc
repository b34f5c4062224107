// `baton report [DIR] [--json] [--plot FILE]`: a job's goodput from the
// event log beside its checkpoints (base/events/, docs/events.md). Reads
// while the job runs as well: a record still being written is skipped.
#include <boost/program_options.hpp>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/events/event_reader.h"
#include "base/events/goodput.h"
#include "cli/commands.h"
#include "cli/report_plot.h"

namespace baton::cli {
namespace {

namespace po = boost::program_options;
using json = nlohmann::json;

constexpr const char* kUsage = "usage: baton report [DIR] [--json] [--plot FILE.png]\n";

std::string Clock(double unix_seconds) {
  const time_t t = static_cast<time_t>(unix_seconds);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%H:%M:%S", &tm);
  return std::string(b) + " UTC";
}

json ToJson(const events::Report& r, const events::ReadStats& st, const std::string& dir) {
  json j;
  j["dir"] = dir;
  j["files"] = st.files;
  j["records"] = st.records;
  j["skipped_lines"] = st.bad_lines;
  j["start"] = r.start;
  j["end"] = r.end;
  j["wall_seconds"] = r.wall;
  j["productive_seconds"] = r.productive;
  j["steps"] = r.steps;
  j["first_step"] = r.first_step;
  j["last_step"] = r.last_step;
  j["step_computations"] = r.computed;
  j["steps_computed_twice"] = r.computed_twice;
  j["checkpoint_stall_seconds"] = r.stall;
  j["saves"] = r.saves;
  j["goodput"] = r.goodput;
  j["restarts"] = r.launches.empty() ? 0 : r.launches.size() - 1;
  j["launches"] = json::array();
  for (const events::LaunchSummary& l : r.launches) {
    json x;
    x["launch"] = l.key;
    x["job"] = l.job;
    x["restart"] = l.restart;
    x["world"] = l.world;
    x["hosts"] = l.hosts;
    x["start"] = l.start;
    x["end"] = l.end;
    x["steps"] = l.steps;
    x["first_step"] = l.first_step;
    x["last_step"] = l.last_step;
    x["saves"] = l.saves;
    x["stall_seconds"] = l.stall;
    x["restored_step"] = l.restored ? json(l.restored_step) : json(nullptr);
    x["restore_level"] = l.restore_level;
    x["restore_seconds"] = l.restore_seconds;
    x["restore_records"] = l.restore_records;
    x["ended"] = l.ended;
    j["launches"].push_back(x);
  }
  j["interruptions"] = json::array();
  for (const events::Interruption& i : r.interruptions) {
    json x;
    x["cause"] = i.cause;
    x["last_step"] = i.last_step;
    x["resumed_step"] = i.resumed_step;
    x["last_progress"] = i.last_progress;
    x["detected"] = i.detected;
    x["started"] = i.started;
    x["restore_started"] = i.restore_started;
    x["restored"] = i.restored;
    x["resumed"] = i.resumed;
    x["total_seconds"] = i.total();
    x["detection_seconds"] = i.detection();
    x["launch_seconds"] = i.launch();
    x["setup_seconds"] = i.setup();
    x["restore_seconds"] = i.restore();
    x["first_step_seconds"] = i.first_step();
    x["cause_detail"] = i.Detail();
    x["step_exit"] = i.step_exit ? json(*i.step_exit) : json(nullptr);
    x["srun_said"] = i.srun_said;
    x["lost_nodes"] = json::array();
    for (const auto& [host, why] : i.lost) x["lost_nodes"].push_back({{"host", host}, {"why", why}});
    x["failures"] = json::array();
    for (const events::FailureSeen& f : i.failures)
      x["failures"].push_back({{"rank", f.rank}, {"t", f.t}, {"what", f.what}});
    j["interruptions"].push_back(x);
  }
  return j;
}

void PrintText(const events::Report& r, const events::ReadStats& st, const std::string& dir) {
  std::printf("baton report: %s (%d log file(s), %lld records%s)\n", dir.c_str(), st.files,
              static_cast<long long>(st.records),
              st.bad_lines > 0 ? (", " + std::to_string(st.bad_lines) + " incomplete line(s) skipped").c_str() : "");
  std::printf("wall time:             %.3f s (%s to %s)\n", r.wall, Clock(r.start).c_str(), Clock(r.end).c_str());
  std::printf("productive step time:  %.3f s (%lld distinct steps, %lld to %lld)\n", r.productive,
              static_cast<long long>(r.steps), static_cast<long long>(r.first_step),
              static_cast<long long>(r.last_step));
  std::printf("steps computed twice:  %lld (of %lld step computations)\n", static_cast<long long>(r.computed_twice),
              static_cast<long long>(r.computed));
  std::printf("checkpoint stall:      %.3f s (%d saves)\n", r.stall, r.saves);
  std::printf("goodput:               %.1f%% (productive / wall)\n", r.goodput * 100);
  std::printf("launches:              %zu (restarts: %zu)\n", r.launches.size(),
              r.launches.empty() ? size_t{0} : r.launches.size() - 1);
  for (size_t i = 0; i < r.launches.size(); ++i) {
    const events::LaunchSummary& l = r.launches[i];
    std::string from = l.restored ? "restored step " + std::to_string(l.restored_step) + " from level " +
                                        std::to_string(l.restore_level)
                                  : std::string("started from nothing");
    // A launch that ended before its first step has none (it printed "steps -1--1").
    const std::string steps = l.first_step < 0 ? std::string("no steps")
                                               : "steps " + std::to_string(l.first_step) + "-" +
                                                     std::to_string(l.last_step);
    std::printf("  %zu. %s: %d ranks, %s, %s, ended: %s\n", i + 1, l.key.c_str(), l.world, from.c_str(),
                steps.c_str(), l.ended.c_str());
  }
  for (size_t i = 0; i < r.interruptions.size(); ++i) {
    const events::Interruption& x = r.interruptions[i];
    std::printf("interruption %zu (%s after step %lld): %.3f s to the first resumed step (%lld)\n", i + 1,
                x.cause.c_str(), static_cast<long long>(x.last_step), x.total(),
                static_cast<long long>(x.resumed_step));
    if (const std::string d = x.Detail(); !d.empty()) std::printf("  cause: %s\n", d.c_str());
    std::printf("  detection %.3f s, scheduling and launch %.3f s, set-up %.3f s, restore %.3f s, first step %.3f s\n",
                x.detection(), x.launch(), x.setup(), x.restore(), x.first_step());
    for (const events::FailureSeen& f : x.failures)
      std::printf("  rank %d at %s: %s\n", f.rank, Clock(f.t).c_str(), f.what.c_str());
  }
}

}  // namespace

int ReportCommand(const std::vector<std::string>& args) {
  std::string dir, plot;
  bool as_json = false;
  po::options_description desc("baton report options");
  desc.add_options()("help,h", "print this help")(
      "dir", po::value(&dir), "checkpoint directory (default: $BATON_CKPT_DIR), or its events/ folder")(
      "json", po::bool_switch(&as_json), "print JSON")("plot", po::value(&plot),
                                                          "write the timeline as a PNG (gnuplot)");
  po::positional_options_description pos;
  pos.add("dir", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(desc).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "baton report: " << e.what() << "\n" << kUsage;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << kUsage << desc;
    return 0;
  }
  if (dir.empty()) {
    const char* env = std::getenv("BATON_CKPT_DIR");
    if (env != nullptr) dir = env;
  }
  if (dir.empty()) {
    std::cerr << "baton report: no directory: give DIR or set BATON_CKPT_DIR\n" << kUsage;
    return 2;
  }
  std::vector<events::Event> evs;
  events::ReadStats st;
  if (Status s = events::ReadEventDir(dir, &evs, &st); !s.ok()) {
    std::cerr << "baton report: " << s.ToString() << "\n";
    return 1;
  }
  const events::Report r = events::Analyze(evs);
  if (as_json) {
    std::cout << ToJson(r, st, dir).dump(2) << "\n";
  } else {
    PrintText(r, st, dir);
  }
  if (!plot.empty()) {
    if (Status s = RunGnuplot(PlotScript(r, evs, plot)); !s.ok()) {
      std::cerr << "baton report: --plot " << plot << ": " << s.ToString() << "\n";
      return 1;
    }
    if (!as_json) std::printf("timeline:              %s\n", plot.c_str());
  }
  return 0;
}

}  // namespace baton::cli
