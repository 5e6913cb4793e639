// UTF-8 validation shared by every reader of text (corpora, vocabularies, GLUE files, config
// files): where the first byte that is not UTF-8 is, so a message can name it.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace rpe {

// Byte offset of the first invalid UTF-8 sequence in `text`, or npos if it is valid.
size_t find_invalid_utf8(std::string_view text);

// `text` made safe for one line of a message: control characters (tab excepted), DEL and bytes
// that are not UTF-8 are written as \xNN; valid UTF-8 text passes unchanged.
std::string escape_for_message(std::string_view text);

}  // namespace rpe
