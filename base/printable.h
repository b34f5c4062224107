// Untrusted text (names, times and lock holders read from a checkpoint
// directory, error messages quoting them) made safe to print: one helper
// for the CLI and the library's messages, so that what `baton ckpt` shows
// and what a restore logs escape the same way.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace baton {

// Every byte outside printable ASCII, and the backslash, as \xNN, so that
// terminal escape codes (ESC, the C1 CSI 0xc2 0x9b, bidi overrides) never
// reach a screen and a newline cannot forge a row. Text longer than
// max_bytes is cut there and ends "...(N more bytes)": a 100 MB field is
// not printed whole.
inline constexpr size_t kPrintableMaxBytes = 4096;
std::string Printable(std::string_view text, size_t max_bytes = kPrintableMaxBytes);

}  // namespace baton
