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
     << "set grid\nset key top right\n";
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
  for (const events::Interruption& x : report.interruptions) {
    const double at = x.detected - report.start, back = x.started - report.start;
    os << "set arrow from " << at << ", graph 0 to " << at << ", graph 1 nohead lc rgb '#cc0000' dt 2 lw 2\n"
       << "set label " << Quoted(PlotCause(x)) << " at " << at << ", graph 0.96 right offset -0.5,0 tc rgb '#cc0000'\n"
       << "set arrow from " << back << ", graph 0 to " << back << ", graph 0.85 nohead lc rgb '#0055cc' dt 3 lw 2\n"
       << "set label " << Quoted("restart") << " at " << back
       << ", graph 0.88 left offset 0.5,0 tc rgb '#0055cc'\n";
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
