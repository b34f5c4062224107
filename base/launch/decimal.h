// The one parser of the decimals the launch derivation reads (Slurm's
// variables, task maps, ports, job ids): std::from_chars, the whole text,
// within bounds. No sign, no spaces, no base prefix: a value Slurm wrote
// never has them, so a text that does is not Slurm's and is refused.
#pragma once

#include <charconv>
#include <string_view>

namespace baton::launch {

// True when `text` is exactly a decimal in [lo, hi]; `*value` is set only then.
inline bool ParseDecimal(std::string_view text, long long lo, long long hi, long long* value) {
  if (text.empty() || text.front() < '0' || text.front() > '9') return false;
  long long v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) return false;
  *value = v;
  return true;
}

}  // namespace baton::launch
