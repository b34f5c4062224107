#include "ckpt/base64.h"

#include <boost/archive/iterators/base64_from_binary.hpp>
#include <boost/archive/iterators/binary_from_base64.hpp>
#include <boost/archive/iterators/dataflow_exception.hpp>
#include <boost/archive/iterators/transform_width.hpp>

namespace baton::ckpt {

namespace {

namespace it = boost::archive::iterators;
// Boost.Archive's header-only iterators (Boost is already a dependency):
// 8-bit bytes regrouped into 6-bit digits and mapped to the alphabet, and back.
using Encoder = it::base64_from_binary<it::transform_width<std::string_view::const_iterator, 6, 8>>;
using Decoder = it::transform_width<it::binary_from_base64<std::string_view::const_iterator>, 8, 6>;

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  // The iterators leave the padding to the caller.
  std::string out(Encoder(bytes.begin()), Encoder(bytes.end()));
  out.append((3 - bytes.size() % 3) % 3, '=');
  return out;
}

bool Base64Decode(std::string_view text, std::string* out) {
  if (text.size() % 4 != 0) return false;
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') pad = text[text.size() - 2] == '=' ? 2 : 1;
  try {
    // Boost reads '=' as the digit 0, so whole groups decode to 3 bytes each;
    // the padding's bytes are dropped after.
    out->assign(Decoder(text.begin()), Decoder(text.end()));
  } catch (const it::dataflow_exception&) {  // a character outside the alphabet
    return false;
  }
  out->resize(text.size() / 4 * 3 - pad);
  // Strict: '=' inside the text, or unused bits that are not zero, would
  // decode too; only the one canonical text of these bytes is accepted.
  return Base64Encode(*out) == text;
}

}  // namespace baton::ckpt
