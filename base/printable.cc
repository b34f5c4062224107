#include "base/printable.h"

#include <cstdio>

namespace baton {

std::string Printable(std::string_view text, size_t max_bytes) {
  const std::string_view shown = text.substr(0, max_bytes);
  std::string out;
  out.reserve(shown.size() + 32);
  for (unsigned char c : shown) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (text.size() > shown.size()) out += "...(" + std::to_string(text.size() - shown.size()) + " more bytes)";
  return out;
}

}  // namespace baton
