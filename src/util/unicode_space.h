// Whitespace as Python's str.isspace() knows it, on UTF-8 bytes: what Google's BERT scripts
// strip (create_pretraining_data.py's "an empty line ends a document", run_squad.py's answer
// text). ASCII space, \t \n \v \f \r, \x1c-\x1f, and U+0085, U+00A0, U+1680, U+2000-U+200A,
// U+2028, U+2029, U+202F, U+205F, U+3000. A zero-width space or a BOM is not whitespace.
#pragma once
#include <string_view>

namespace rpe {

// True when every character of `s` is whitespace (so for ""); bytes that are not UTF-8 are not.
bool is_all_space(std::string_view s);

// `s` without leading and trailing whitespace (Python's s.strip()).
std::string_view strip_space(std::string_view s);

}  // namespace rpe
