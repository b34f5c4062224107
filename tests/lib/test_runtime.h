// The baton::Runtime of a multi-rank test binary: created once before the
// first test, destroyed after the last, however many test files use it.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "baton/runtime.h"

namespace baton::testing {

inline Runtime* g_runtime = nullptr;

class RuntimeEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    Status s = Runtime::Create(nullptr, nullptr, {}, &rt_);
    ASSERT_TRUE(s.ok()) << s;
    g_runtime = rt_.get();
  }
  void TearDown() override {
    g_runtime = nullptr;
    rt_.reset();
  }

 private:
  std::unique_ptr<Runtime> rt_;
};

// An inline variable: registered once per binary, not once per file.
inline ::testing::Environment* const kRuntimeEnvironment =
    ::testing::AddGlobalTestEnvironment(new RuntimeEnvironment);

}  // namespace baton::testing
