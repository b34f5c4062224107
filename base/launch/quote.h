// A value from the environment: what it must not hold (control
// characters), and how it is shown in an error message: quoted,
// control characters escaped (a newline in a host name must not forge a
// second log line), cut after 200 bytes (a hostile 4 KB host list must not
// flood the log) with its full size said.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace baton::launch {

// The one test of what a value must not hold. A control character (a
// newline above all) in a path, template or name would forge a second line
// of a file, a log or the environment.
inline bool IsControl(unsigned char c) { return c < 0x20 || c == 0x7f; }

inline bool HasControl(std::string_view value) {
  for (char ch : value)
    if (IsControl(static_cast<unsigned char>(ch))) return true;
  return false;
}

inline std::string Quoted(std::string_view value) {
  constexpr size_t kShown = 200;
  std::string out = "'";
  for (size_t i = 0; i < value.size() && i < kShown; ++i) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (IsControl(c)) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += "'";
  if (value.size() > kShown) out += "... (" + std::to_string(value.size()) + " bytes)";
  return out;
}

// True when `value` holds a control character or a blank: such a name
// (a host name, an address) must never reach a file line, where it would
// split one entry into two or add a forged one.
inline bool HasControlOrBlank(std::string_view value) {
  for (char ch : value)
    if (ch == ' ' || IsControl(static_cast<unsigned char>(ch))) return true;
  return false;
}

}  // namespace baton::launch
