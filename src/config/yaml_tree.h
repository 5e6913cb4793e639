// Internal to src/config: the raw YAML tree of an experiment before it is typed.
// Files compose with `extends: other.yaml` (or a list); later files and keys win,
// maps merge recursively, anything else is replaced; a file reached twice (a diamond of
// extends) is merged once, where first reached; a key without a value is an error, and so are
// a repeated key, a second document and bytes that are not UTF-8. Each key path remembers
// where it was set ("configs/x.yaml:12", or the "--set a.b=c" that wrote it or a section above
// it) so errors can point at it.
#pragma once
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace rpe::config_detail {

struct YamlTree {
  YAML::Node root = YAML::Node(YAML::NodeType::Map);
  std::map<std::string, std::string> origins;  // key path -> "file:line" or "--set a.b=c"
};

// Loads a file and everything it extends. UserError on unreadable or malformed files
// and on extends cycles.
YamlTree load_tree(const std::filesystem::path& file);

// Parses YAML text that has no extends (e.g. from a checkpoint).
YamlTree tree_from_text(const std::string& text, const std::string& name);

// Merges `src` over `dst` (maps merge, everything else replaces) with its origins.
void merge_tree(YamlTree& dst, const YamlTree& src);

// Applies "a.b.c=value"; value is parsed as YAML (so 3, 1e-4, true, [a, b] work). UserError
// "--set a.b.c=value: ..." for an empty key segment, a null value or bytes that are not UTF-8.
void apply_override(YamlTree& tree, const std::string& assignment);

// See rpe::assignment_sets (config.h).
bool assignment_sets(const std::string& assignment, const std::string& key_path);

}  // namespace rpe::config_detail
