#pragma once
// `baton report --plot FILE`: the job's timeline as a PNG, drawn by gnuplot
// (pngcairo): the loss (or, without losses in the log, the step rate)
// against the time since the job's first launch, each launch in its own
// colour, failures and stops marked in red, restarts in blue.
#include <string>
#include <vector>

#include "base/events/event_reader.h"
#include "base/events/goodput.h"
#include "baton/status.h"

namespace baton::cli {

// The gnuplot script (data inline), for tests and --plot.
std::string PlotScript(const events::Report& report, const std::vector<events::Event>& events,
                       const std::string& png);

// Runs gnuplot on the script: Unavailable naming gnuplot when it is missing
// (scripts/install-deps installs gnuplot-nox), IOError with its exit status.
Status RunGnuplot(const std::string& script);

}  // namespace baton::cli
