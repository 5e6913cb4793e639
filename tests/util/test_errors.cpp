// UserError's message is what main() prints: it must survive whatever user input it quotes.
#include <gtest/gtest.h>

#include <string>

#include "util/errors.h"
#include "util/utf8.h"

namespace rpe {
namespace {

// std::runtime_error keeps a C string: a NUL from a key, a path or a record cut the message
// there ("unknown key 'a" for a key "a\0b"), hiding the rest of what it said.
TEST(UserErrorText, ANulIsShownNotCutAt) {
  const std::string quoted("a\0b", 3);
  EXPECT_STREQ(UserError("unknown key '" + quoted + "': see the docs").what(), "unknown key 'a\\0b': see the docs");
  EXPECT_STREQ(UserError(std::string(1, '\0')).what(), "\\0");
  EXPECT_STREQ(UserError("plain text, untouched \\0").what(), "plain text, untouched \\0");
  try {
    require(false, "x" + quoted);
    FAIL() << "require(false) did not throw";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "xa\\0b");
  }
}

// What the CLI's last line and a --set's label print: one line, valid UTF-8, every other byte
// readable as \xNN (expected strings written out by hand).
TEST(EscapeForMessage, ControlAndInvalidBytesBecomeHex) {
  EXPECT_EQ(escape_for_message("plain ascii, caf\xc3\xa9 \xe2\x82\xac"), "plain ascii, caf\xc3\xa9 \xe2\x82\xac");  // valid UTF-8
  EXPECT_EQ(escape_for_message("tab\tstays"), "tab\tstays");
  EXPECT_EQ(escape_for_message(std::string("a\0b\x1b[31m\x7f", 9)), "a\\x00b\\x1b[31m\\x7f");
  EXPECT_EQ(escape_for_message("\xff"), "\\xff");                          // never a UTF-8 byte
  EXPECT_EQ(escape_for_message("x\xc3"), "x\\xc3");                        // a cut two-byte sequence
  EXPECT_EQ(escape_for_message("\xc3\xa9\xc3(\xe2\x82"), "\xc3\xa9\\xc3(\\xe2\\x82");  // each bad byte, then text resumes
  EXPECT_EQ(escape_for_message(""), "");
}

// A quoted line of a file in a message: whole when short, else cut, never inside a character.
TEST(Excerpt, LongTextIsCutAtACharacterAndSaysItsLength) {
  EXPECT_EQ(excerpt("short", 10), "short");
  EXPECT_EQ(excerpt("0123456789", 10), "0123456789");
  EXPECT_EQ(excerpt("0123456789ab", 10), "0123456789... (12 bytes)");
  EXPECT_EQ(excerpt("12345678\xc3\xa9z", 9), "12345678... (11 bytes)");  // not half of the é
  EXPECT_EQ(excerpt(std::string(63294, 'x')).size(), 100 + std::string("... (63294 bytes)").size());
}

}  // namespace
}  // namespace rpe
