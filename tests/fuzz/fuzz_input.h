// Splitting one fuzz input into the several strings a target needs. The
// separator is a byte that no valid value holds (the fuzzer learns it from
// the seeds), so mutations still reach every field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace baton::fuzz {

inline std::vector<std::string> Fields(const uint8_t* data, size_t size, char sep, size_t max_fields = 64) {
  std::vector<std::string> out(1);
  for (size_t i = 0; i < size; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == sep && out.size() < max_fields) out.emplace_back();
    else out.back().push_back(c);
  }
  return out;
}

}  // namespace baton::fuzz
