// main() of the single-process GoogleTest suites.
#include <gtest/gtest.h>

#include "tests/lib/tsv_result_writer.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  baton::testing::InstallTsvResultWriter(-1);
  return RUN_ALL_TESTS();
}
