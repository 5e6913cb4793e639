// Settings files that are not experiment configs (configs/reproduce/<scale>.yaml), read by
// bash scripts through `rpe-train dump-config --shell FILE` rather than by a YAML parser in bash.
#pragma once
#include <filesystem>
#include <string>

namespace rpe {

// FILE's top-level keys (after extends) as bash assignments, one per line, keys upper-cased:
//   key: value        -> KEY='value'
//   key: [a, b]       -> KEY=('a' 'b')
// Values are single-quoted (shell-safe). UserError naming the file and key for a key that is
// not a shell name or a value that is neither a scalar nor a list of scalars.
std::string shell_assignments(const std::filesystem::path& file);

}  // namespace rpe
