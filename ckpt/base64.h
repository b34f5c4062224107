// Base64 (RFC 4648, with padding) for the user blob in the manifest.
#pragma once

#include <string>
#include <string_view>

namespace baton::ckpt {

std::string Base64Encode(std::string_view bytes);
// Strict: length a multiple of 4, '=' only as the last one or two
// characters, unused bits zero (one text per blob). False on anything else;
// *out is then unspecified.
bool Base64Decode(std::string_view text, std::string* out);

}  // namespace baton::ckpt
