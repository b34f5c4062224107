// base/env_options.h: option > environment > default, bad values named.
#include "base/env_options.h"

#include <signal.h>
#include <stdlib.h>

#include <gtest/gtest.h>

namespace baton {
namespace {

constexpr const char* kVar = "BATON_TEST_ENV_OPTION";

class EnvOptions : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv(kVar); }
};

TEST_F(EnvOptions, OptionWinsOverEnvironmentWhichWinsOverDefault) {
  double x = 0;
  setenv(kVar, "2.5", 1);
  ASSERT_TRUE(PositiveNumberOption("timeout", 7, kVar, 600, &x).ok());
  EXPECT_EQ(x, 7);
  ASSERT_TRUE(PositiveNumberOption("timeout", 0, kVar, 600, &x).ok());
  EXPECT_EQ(x, 2.5);
  unsetenv(kVar);
  ASSERT_TRUE(PositiveNumberOption("timeout", 0, kVar, 600, &x).ok());
  EXPECT_EQ(x, 600);
  setenv(kVar, "", 1);  // set but empty: as unset
  ASSERT_TRUE(PositiveNumberOption("timeout", 0, kVar, 600, &x).ok());
  EXPECT_EQ(x, 600);
}

TEST_F(EnvOptions, BadNumbersAreNamed) {
  double x = 0;
  for (const char* bad : {"ten", "0", "-3", "1.5s", "nan", "inf"}) {
    setenv(kVar, bad, 1);
    Status s = PositiveNumberOption("timeout", 0, kVar, 600, &x);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(std::string(kVar) + "='" + bad + "'"), std::string::npos) << s;
  }
  Status s = PositiveNumberOption("timeout", -1, kVar, 600, &x);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("timeout -1"), std::string::npos) << s;
}

TEST_F(EnvOptions, Counts) {
  long n = 0;
  setenv(kVar, "50", 1);
  ASSERT_TRUE(PositiveCountOption("every", 0, kVar, 100, &n).ok());
  EXPECT_EQ(n, 50);
  for (const char* bad : {"often", "0", "-2", "5.5"}) {
    setenv(kVar, bad, 1);
    EXPECT_EQ(PositiveCountOption("every", 0, kVar, 100, &n).code(), Code::kInvalidArgument) << bad;
  }
}

TEST_F(EnvOptions, Signals) {
  int sig = 0;
  for (const char* usr2 : {"USR2", "SIGUSR2", "sigusr2", "usr2"}) {
    ASSERT_TRUE(ParseSignal(usr2, &sig).ok()) << usr2;
    EXPECT_EQ(sig, SIGUSR2);
  }
  ASSERT_TRUE(ParseSignal(std::to_string(SIGTERM), &sig).ok());
  EXPECT_EQ(sig, SIGTERM);
  for (const char* bad : {"KILL", "SIGSTOP", "9", "", "USR3"}) {
    Status s = ParseSignal(bad, &sig);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
  }
  setenv(kVar, "USR1", 1);
  ASSERT_TRUE(SignalOption("stop_signal", 0, kVar, SIGUSR2, &sig).ok());
  EXPECT_EQ(sig, SIGUSR1);
  unsetenv(kVar);
  ASSERT_TRUE(SignalOption("stop_signal", 0, kVar, SIGUSR2, &sig).ok());
  EXPECT_EQ(sig, SIGUSR2);
  Status s = SignalOption("stop_signal", SIGKILL, kVar, SIGUSR2, &sig);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("stop_signal"), std::string::npos) << s;
}

}  // namespace
}  // namespace baton
