// Where the tests find the repository and the built CLI. Defined in test_paths.cpp, the one
// test object compiled with these absolute paths, so every other test object stays
// path-independent and ccache can share it between checkouts.
#pragma once

#include <string>

namespace rpe::test {
const std::string& source_dir();    // the repository root (../shared sits next to it)
const std::string& train_binary();  // the rpe-train executable built with the tests
}  // namespace rpe::test
