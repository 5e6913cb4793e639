// UserError's message is what main() prints: it must survive whatever user input it quotes.
#include <gtest/gtest.h>

#include <string>

#include "util/errors.h"

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

}  // namespace
}  // namespace rpe
