// A GoogleTest listener that appends one line per test to a TSV file:
//   PASS|FAIL|SKIP <TAB> label <TAB> Suite.Name <TAB> first failure message
// scripts/lib/tally sums these files over every suite and rank; a
// multi-rank test counts once, failed if it failed on any rank. Plain TSV
// (not gtest's JSON) so the tally works even when the build did not.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace baton::testing {

// Installs the writer when BATON_TEST_RESULTS (a directory) and
// BATON_TEST_LABEL are set; the file is DIR/LABEL.tsv, or
// DIR/LABEL.rankR.tsv when rank >= 0. Does nothing otherwise.
void InstallTsvResultWriter(int rank);

}  // namespace baton::testing
