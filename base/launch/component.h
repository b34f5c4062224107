// The log channel and Status component of the launch derivation: the SPANK
// plugin and `baton env` both report as "spank".
#pragma once

namespace baton::launch {
inline constexpr const char* kComponent = "spank";
}  // namespace baton::launch
