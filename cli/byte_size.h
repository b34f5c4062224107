// Byte counts on the command line: "64M" -> 67108864.
#pragma once

#include <cstddef>
#include <string>

namespace baton::cli {

// Digits with an optional K, M or G suffix, powers of 1024 (as in
// nccl-tests). False for anything else, or a value that overflows.
bool ParseBytes(const std::string& text, size_t* out);

}  // namespace baton::cli
