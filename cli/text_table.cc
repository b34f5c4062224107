#include "cli/text_table.h"

#include <algorithm>

namespace baton::cli {

TextTable::TextTable(std::vector<std::string> headers, std::vector<Align> align)
    : headers_(std::move(headers)), align_(std::move(align)) {
  align_.resize(headers_.size(), Align::kLeft);
}

void TextTable::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

std::string TextTable::Render() const {
  std::vector<size_t> width(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) width[c] = headers_[c].size();
  for (const auto& row : rows_)
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c) text += "  ";
      const std::string pad(width[c] - cells[c].size(), ' ');
      const bool last = c + 1 == cells.size();
      if (align_[c] == Align::kRight) {
        text += pad + cells[c];
      } else {
        text += cells[c];
        if (!last) text += pad;
      }
    }
    text.erase(text.find_last_not_of(' ') + 1);  // an empty last cell leaves no blanks either
    out += text + "\n";
  };
  line(headers_);
  for (const auto& row : rows_) line(row);
  return out;
}

void TextTable::Print(std::FILE* out) const { std::fputs(Render().c_str(), out); }

}  // namespace baton::cli
