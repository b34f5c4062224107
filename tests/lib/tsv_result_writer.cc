#include "tests/lib/tsv_result_writer.h"

#include <cstdlib>
#include <fstream>
#include <memory>

namespace baton::testing {
namespace {

// Tabs and newlines would break the TSV row; messages keep their words.
std::string OneLine(std::string text) {
  for (char& c : text)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  if (text.size() > 400) text = text.substr(0, 400) + "...";
  return text;
}

class TsvResultWriter : public ::testing::EmptyTestEventListener {
 public:
  TsvResultWriter(std::string path, std::string label) : path_(std::move(path)), label_(std::move(label)) {}

  void OnTestPartResult(const ::testing::TestPartResult& part) override {
    if (part.failed() && first_failure_.empty()) {
      first_failure_ = std::string(part.file_name() ? part.file_name() : "?") + ":" +
                       std::to_string(part.line_number()) + ": " + part.message();
    }
    if (part.skipped() && skip_reason_.empty()) skip_reason_ = part.message();
  }

  void OnTestEnd(const ::testing::TestInfo& info) override {
    const ::testing::TestResult* r = info.result();
    std::string status = r->Failed() ? "FAIL" : r->Skipped() ? "SKIP" : "PASS";
    std::string detail = r->Failed() ? first_failure_ : r->Skipped() ? skip_reason_ : "";
    // Appending and closing per test: a crash in a later test keeps these.
    std::ofstream out(path_, std::ios::app);
    out << status << '\t' << label_ << '\t' << info.test_suite_name() << '.' << info.name() << '\t'
        << OneLine(detail) << '\n';
    first_failure_.clear();
    skip_reason_.clear();
  }

 private:
  std::string path_, label_, first_failure_, skip_reason_;
};

}  // namespace

void InstallTsvResultWriter(int rank) {
  const char* dir = std::getenv("BATON_TEST_RESULTS");
  const char* label = std::getenv("BATON_TEST_LABEL");
  if (!dir || !*dir || !label || !*label) return;
  std::string path = std::string(dir) + "/" + label;
  if (rank >= 0) path += ".rank" + std::to_string(rank);
  path += ".tsv";
  ::testing::UnitTest::GetInstance()->listeners().Append(new TsvResultWriter(path, label));
}

}  // namespace baton::testing
