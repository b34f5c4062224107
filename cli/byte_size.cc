#include "cli/byte_size.h"

#include <cctype>
#include <charconv>
#include <string>

namespace baton::cli {

bool ParseBytes(const std::string& text, size_t* out) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  unsigned long long v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc()) return false;
  const size_t pos = static_cast<size_t>(r.ptr - text.data());
  int shift = 0;
  if (pos < text.size()) {
    if (pos + 1 != text.size()) return false;
    switch (std::toupper(static_cast<unsigned char>(text[pos]))) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      default: return false;
    }
  }
  if (v > (~0ull >> shift)) return false;
  *out = static_cast<size_t>(v << shift);
  return true;
}

}  // namespace baton::cli
