// Columns sized to what they hold, for the CLI's tables (`baton ckpt inspect`).
//
// printf widths fixed in advance misalign as soon as one cell is longer
// (an FSDP2 key of 40 characters, a dtype such as float8_e4m3fnuz): every
// column here is as wide as its widest cell, header included.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace baton::cli {

class TextTable {
 public:
  enum class Align { kLeft, kRight };

  // One header per column; `align` (default: all left) says how each is padded.
  explicit TextTable(std::vector<std::string> headers, std::vector<Align> align = {});

  // A row of exactly as many cells as headers; a missing cell prints empty,
  // an extra one is dropped (a caller's bug, never worth aborting a listing).
  void AddRow(std::vector<std::string> cells);

  // Two spaces between columns; no line ends in blanks.
  std::string Render() const;
  void Print(std::FILE* out) const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> align_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace baton::cli
