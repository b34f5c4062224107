#include "cli/report_plot.h"

#include <sys/wait.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>

namespace baton::cli {
namespace {

constexpr const char* kComponent = "report";

// A gnuplot string in single quotes: quotes doubled, control bytes dropped.
std::string Quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "''";
    else if (static_cast<unsigned char>(c) >= 0x20) q += c;
  }
  return q + "'";
}

std::string Title(const events::Report& report) {
  char t[200];
  std::snprintf(t, sizeof t, "goodput %.1f%%: %lld steps in %.1f s, %zu launch(es), %zu interruption(s)",
                report.goodput * 100, static_cast<long long>(report.steps), report.wall, report.launches.size(),
                report.interruptions.size());
  return t;
}

// The interruption's word on the plot: the cause, and the lost nodes (or
// srun's exit status) when the batch script recorded them.
std::string PlotCause(const events::Interruption& x) {
  std::string label = x.cause;
  std::string hosts;
  for (const auto& [host, why] : x.lost) hosts += (hosts.empty() ? "" : ",") + host;
  if (!hosts.empty()) {
    label += ": " + hosts;
  } else if (x.step_exit && x.cause.rfind("exit ", 0) != 0) {
    label += " (srun exit " + std::to_string(*x.step_exit) + ")";
  }
  return label;
}

// The line's colour says what kind of end it was: a failure (of a rank, a
// node, or an exit with no word) red; the agreed stop (a preemption, the
// time limit, a requeue asked for) amber; a normal end grey, not a failure.
const char* CauseColour(const std::string& cause) {
  if (cause == "end") return "#777777";
  if (cause == "stop") return "#c07000";
  return "#cc0000";
}

}  // namespace

std::string PlotScript(const events::Report& report, const std::vector<events::Event>& events,
                       const std::string& png) {
  bool have_loss = false;
  std::map<std::string, size_t> launch_index;
  for (size_t i = 0; i < report.launches.size(); ++i) launch_index[report.launches[i].key] = i;
  for (const events::Event& e : events)
    if (e.kind == "step" && e.loss) have_loss = true;
  std::ostringstream os;
  os.precision(9);
  os << "set terminal pngcairo size 1000,560 font ',11'\n"
     << "set output " << Quoted(png) << "\n"
     << "set title " << Quoted(Title(report)) << "\n"
     << "set xlabel 'seconds since the first launch'\n"
     << "set ylabel " << Quoted(have_loss ? "loss" : "steps per second") << "\n"
     << "set grid\n"
     // Below the plot, outside it: inside, the legend covered the labels of
     // the interruptions, which stand at the top of the plot; at most 4 to a row,
     // and a bottom margin that holds the tics, the
     // x label and every row of it (a second row overlapped the label).
     << "set key outside bottom center horizontal maxcols 4\n"
     << "set bmargin " << 4 + (report.launches.size() + 3) / 4 << "\n";
  // The whole job: gnuplot's autoscale sees only the loss lines, and a
  // restart after the last step (a launch that made none) fell off the plot.
  if (report.wall > 0) os << "set xrange [0:" << report.wall * 1.02 << "]\n";
  // One data block per launch: the counted rank's steps.
  for (size_t i = 0; i < report.launches.size(); ++i) {
    const events::LaunchSummary& l = report.launches[i];
    os << "$launch" << i << " << EOD\n";
    double prev = -1;
    for (const events::Event& e : events) {
      if (e.kind != "step" || e.launch != l.key || e.rank != l.rank) continue;
      if (have_loss) {
        if (e.loss) os << e.t - report.start << " " << *e.loss << "\n";
      } else if (prev >= 0 && e.t > prev) {
        os << e.t - report.start << " " << 1.0 / (e.t - prev) << "\n";
      }
      prev = e.t;
    }
    os << "EOD\n";
  }
  for (size_t i = 0; i < report.interruptions.size(); ++i) {
    const events::Interruption& x = report.interruptions[i];
    const double at = x.detected - report.start, back = x.started - report.start;
    const std::string colour = CauseColour(x.cause);
    // Interruptions close together would write their labels over each
    // other: each of three in a row stands lower than the one before.
    const double high = 0.96 - 0.12 * static_cast<double>(i % 3);
    // The cause stands left of its line, the restart right of its own,
    // unless that side is too near the plot's edge to hold the word.
    const bool cause_left = at > 0.25 * report.wall, restart_right = back < 0.85 * report.wall;
    os << "set arrow from " << at << ", graph 0 to " << at << ", graph 1 nohead lc rgb '" << colour
       << "' dt 2 lw 2\n"
       << "set label " << Quoted(PlotCause(x)) << " at " << at << ", graph " << high
       << (cause_left ? " right offset -0.5,0" : " left offset 0.5,0") << " tc rgb '" << colour << "'\n"
       << "set arrow from " << back << ", graph 0 to " << back << ", graph " << high - 0.11
       << " nohead lc rgb '#0055cc' dt 3 lw 2\n"
       << "set label " << Quoted("restart") << " at " << back << ", graph " << high - 0.06
       << (restart_right ? " left offset 0.5,0" : " right offset -0.5,0") << " tc rgb '#0055cc'\n";
  }
  os << "plot ";
  bool any = false;
  for (size_t i = 0; i < report.launches.size(); ++i) {
    os << (any ? ", " : "") << "$launch" << i << " using 1:2 with lines lw 1.5 title "
       << Quoted("launch " + std::to_string(i + 1) + " (" + std::to_string(report.launches[i].world) + " ranks)");
    any = true;
  }
  if (!any) os << "NaN notitle";
  os << "\n";
  return os.str();
}

Status RunGnuplot(const std::string& script) {
  // popen runs /bin/sh: gnuplot is found on PATH, as the demo finds it.
  // A gnuplot that exits early must not kill us with SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  FILE* p = ::popen("gnuplot 2>&1", "w");
  if (p == nullptr) return Status::IOError(kComponent, std::string("popen(gnuplot): ") + std::strerror(errno));
  const size_t n = std::fwrite(script.data(), 1, script.size(), p);
  const int rc = ::pclose(p);
  if (rc != 0 && WIFEXITED(rc) && WEXITSTATUS(rc) == 127)
    return Status::Unavailable(kComponent, "gnuplot is not installed (scripts/install-deps installs gnuplot-nox)");
  if (n != script.size() || rc != 0)
    return Status::IOError(kComponent, "gnuplot failed (exit status " + std::to_string(rc) + ")");
  return Status::OK();
}

}  // namespace baton::cli
