// Logging: Boost.Log with one channel per component and rank/host/job on
// every line.
//
//   BATON_LOG(kCkpt, warning) << "falling back to step " << step;
//   -> 2026-11-29 13:40:01.123 baton.ckpt WARNING rank=3 host=n2 job=17.0: falling back to step 40
//
// The threshold comes from BATON_LOG_LEVEL (trace, debug, info, warning,
// error, off; default info) when the first line is logged. Lines go to
// standard error, flushed per line (a killed rank loses nothing it logged).
// Thread-safe.
#pragma once

#include <boost/log/sources/record_ostream.hpp>
#include <boost/log/sources/severity_channel_logger.hpp>

#include <ostream>
#include <string>
#include <string_view>

#include "baton/status.h"

namespace baton::log {

enum class Level { trace = 0, debug, info, warning, error, off };

std::string_view LevelName(Level level);
std::ostream& operator<<(std::ostream& os, Level level);

// Parses a BATON_LOG_LEVEL value ("warn" is accepted for "warning", any
// case). Unknown values give InvalidArgument naming the value.
Status ParseLevel(std::string_view text, Level* level);

// Sets up the sink and the threshold from BATON_LOG_LEVEL. Idempotent; run
// on the first log line if nobody called it. A bad BATON_LOG_LEVEL keeps
// the default (info), logs a warning naming the value, and is returned.
Status Init();

void SetLevel(Level level);
Level GetLevel();

// Channels: one per component, named after the folder that holds it.
inline constexpr const char* kBase = "base";
inline constexpr const char* kSpank = "spank";
inline constexpr const char* kRuntime = "runtime";
inline constexpr const char* kCkpt = "ckpt";
inline constexpr const char* kCli = "cli";
inline constexpr const char* kTest = "test";

using Logger = boost::log::sources::severity_channel_logger_mt<Level, std::string>;

// The process-wide logger (sets itself up on first use).
Logger& GetLogger();

// Cheap check used by BATON_LOG to skip formatting below the threshold.
bool Enabled(Level level);

}  // namespace baton::log

#define BATON_LOG(channel, level)                                        \
  if (!::baton::log::Enabled(::baton::log::Level::level)) {              \
  } else                                                                 \
    BOOST_LOG_CHANNEL_SEV(::baton::log::GetLogger(), ::baton::log::channel, \
                          ::baton::log::Level::level)
