#include "base/launch/hostlist_bound.h"

#include <charconv>
#include <cstdint>
#include <string>

#include "base/launch/component.h"
#include "base/launch/quote.h"

namespace baton::launch {
namespace {

constexpr uint64_t kSaturated = UINT64_MAX;

uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return a > kSaturated - b ? kSaturated : a + b; }
uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? kSaturated : r;
}

// One number of a range: digits only, at most 2^64-1.
bool ParseNumber(std::string_view text, uint64_t* value) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return ec == std::errc() && end == text.data() + text.size();
}

// The hosts one bracket group's "1-3,7,09-12" stands for, or an error
// naming what is wrong with it.
bool CountGroup(std::string_view group, uint64_t* count, std::string* why) {
  *count = 0;
  if (group.empty()) {
    *why = "an empty range []";
    return false;
  }
  size_t start = 0;
  while (start <= group.size()) {
    size_t comma = group.find(',', start);
    if (comma == std::string_view::npos) comma = group.size();
    const std::string_view item = group.substr(start, comma - start);
    const size_t dash = item.find('-');
    uint64_t lo = 0;
    uint64_t hi = 0;
    const bool numbers = dash == std::string_view::npos
                             ? ParseNumber(item, &lo) && (hi = lo, true)
                             : ParseNumber(item.substr(0, dash), &lo) && ParseNumber(item.substr(dash + 1), &hi);
    if (!numbers) {
      *why = "range " + Quoted(item) + " is not a number or two joined by '-'";
      return false;
    }
    if (hi < lo) {
      *why = "range " + Quoted(item) + " runs backwards";
      return false;
    }
    *count = SaturatingAdd(*count, hi - lo == kSaturated ? kSaturated : hi - lo + 1);
    start = comma + 1;
  }
  return true;
}

}  // namespace

Status CheckHostlistBound(std::string_view hostlist, size_t max_hosts) {
  uint64_t total = 0;
  uint64_t entry = 1;  // the product of this entry's groups
  std::string why;
  for (size_t i = 0; i < hostlist.size() && why.empty(); ++i) {
    const char c = hostlist[i];
    if (c == ',') {
      total = SaturatingAdd(total, entry);
      entry = 1;
    } else if (c == ']') {
      why = "a ']' with no '[' before it";
    } else if (c == '[') {
      const size_t close = hostlist.find_first_of("[]", i + 1);
      if (close == std::string_view::npos || hostlist[close] != ']') {
        why = close == std::string_view::npos ? "a '[' never closed" : "a '[' inside another";
        break;
      }
      uint64_t count = 0;
      if (!CountGroup(hostlist.substr(i + 1, close - i - 1), &count, &why)) break;
      entry = SaturatingMul(entry, count);
      i = close;
    }
  }
  if (!why.empty()) return Status::InvalidArgument(kComponent, "host list " + Quoted(hostlist) + " is malformed: " + why);
  const uint64_t hosts = SaturatingAdd(total, entry);
  if (hosts > max_hosts) {
    return Status::InvalidArgument(kComponent, "host list " + Quoted(hostlist) + " names " +
                                                   (hosts == kSaturated ? "2^64 or more" : std::to_string(hosts)) +
                                                   " hosts, more than the " + std::to_string(max_hosts) +
                                                   " it can hold");
  }
  return Status::OK();
}

}  // namespace baton::launch
