// Loading YAML files with `extends:` composition and --set overrides.
#include "config/yaml_tree.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <ios>
#include <set>
#include <sstream>
#include <string_view>
#include <system_error>

#include "util/errors.h"
#include "util/utf8.h"

namespace rpe::config_detail {
namespace fs = std::filesystem;

namespace {

std::string location(const std::string& file, const YAML::Mark& mark) {
  return mark.line >= 0 ? file + ":" + std::to_string(mark.line + 1) : file;
}

// Records the origin of every key below `node` (prefix = its key path).
void record_origins(const YAML::Node& node, const std::string& prefix, const std::string& file,
                    std::map<std::string, std::string>& origins) {
  if (!node.IsMap()) return;
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    origins[path] = location(file, kv.first.Mark());
    record_origins(kv.second, path, file, origins);
  }
}

// A YAML alias (*a) refers to its anchor's node, so nested aliases ("billion laughs": ten
// references to ten references to ...) make a few hundred bytes a tree of 10^9 values that
// every walk and copy expands. A config holds a few hundred; this many is refused at once.
constexpr int64_t kMaxConfigValues = 100000;

// A key that is a list, a mapping or nothing (`? [a, b]`, `{a: 1}: 2`, `~: 1`, `"": 1`) has no
// name: Scalar() reads it as "", and the messages that cite it would name an empty key.
void reject_complex_key(const YAML::Node& key, const std::string& prefix, const std::string& name, bool with_lines) {
  if (key.IsScalar() && !key.Scalar().empty()) return;
  std::string what = "empty";
  if (key.IsSequence() || key.IsMap()) {
    YAML::Emitter text;
    text << YAML::Flow << key;
    what = std::string(key.IsSequence() ? "a list (" : "a mapping (") + excerpt(one_line(text.c_str()), 40) + ")";
  }
  throw UserError((with_lines ? location(name, key.Mark()) : name) + ": " + (prefix.empty() ? "a" : prefix + ": a") +
                  " key is " + what + "; keys must be plain names");
}

void check_keys(const YAML::Node& node, const std::string& prefix, const std::string& name, bool with_lines,
                int64_t& seen) {
  if (++seen > kMaxConfigValues)
    throw UserError(name + ": more than " + std::to_string(kMaxConfigValues) +
                    " values once its YAML aliases (*name) are expanded; a config holds a few hundred: "
                    "write them out instead of nesting aliases");
  if (node.IsSequence())
    for (const auto& item : node) check_keys(item, prefix, name, with_lines, seen);
  if (!node.IsMap()) return;
  std::map<std::string, int> first_line;
  for (const auto& kv : node) {
    reject_complex_key(kv.first, prefix, name, with_lines);
    const std::string key = kv.first.Scalar();
    // A control character (a quoted "\0") would cut or garble the messages that name the key.
    if (const auto c = std::find_if(key.begin(), key.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x20; });
        c != key.end())
      throw UserError((with_lines ? location(name, kv.first.Mark()) : name) + ": " + (prefix.empty() ? "a" : prefix + ": a") +
                      " key holds the control character " + std::to_string(static_cast<int>(*c)) +
                      " (keys are plain names)");
    const std::string path = prefix.empty() ? key : prefix + "." + key;
    const auto [first, fresh] = first_line.emplace(key, kv.first.Mark().line + 1);
    if (!fresh)
      throw UserError((with_lines ? location(name, kv.first.Mark()) : name) + ": " + path + ": duplicate key" +
                      (with_lines ? " (first set at line " + std::to_string(first->second) + ")" : "") +
                      "; a key may appear once in a mapping");
    check_keys(kv.second, path, name, with_lines, seen);
  }
}

// yaml-cpp keeps both pairs of a repeated key and merging applies them in turn, so the last
// one would silently win: refused. `with_lines`: marks are lines of a file (not of a --set).
// Also refuses a tree of more than kMaxConfigValues values (nested aliases), before any copy.
void reject_duplicate_keys(const YAML::Node& node, const std::string& prefix, const std::string& name,
                           bool with_lines) {
  int64_t seen = 0;
  check_keys(node, prefix, name, with_lines, seen);
}

// Recursively merges `src` into `dst` (maps merge, everything else replaces).
void merge_into(YAML::Node dst, const YAML::Node& src) {
  for (const auto& kv : src) {
    const std::string key = kv.first.Scalar();
    if (kv.second.IsMap() && dst[key] && dst[key].IsMap()) {
      merge_into(dst[key], kv.second);
    } else {
      dst[key] = YAML::Clone(kv.second);
    }
  }
}

// A config path must name a readable regular file: a folder would reach yaml-cpp's
// stream as an uncaught std::ios_base::failure. `what` says how the file was named.
void check_config_file(const fs::path& file, const std::string& what) {
  std::error_code ec;
  const auto status = fs::status(file, ec);
  if (status.type() == fs::file_type::not_found) throw UserError(what + "config file not found: " + file.string());
  if (ec) throw UserError(what + "cannot access config file " + file.string() + ": " + ec.message());
  if (status.type() == fs::file_type::directory)
    throw UserError(what + "config file " + file.string() + " is a folder, not a YAML file");
  if (status.type() != fs::file_type::regular)
    throw UserError(what + "config file " + file.string() + " is not a regular file");
}

// Config files are UTF-8: other bytes would pass through yaml-cpp untouched into run.name
// and the like, and from there into folder names and JSON that no reader accepts.
void check_utf8(const std::string& text, const std::string& name) {
  const size_t bad = find_invalid_utf8(text);
  if (bad == std::string::npos) return;
  const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n');
  throw UserError(name + ":" + std::to_string(line) + ": not UTF-8 text (byte offset " + std::to_string(bad) +
                  "); save the file as UTF-8");
}

std::string read_config_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  if (!in || in.bad()) throw UserError("cannot read config file " + file.string());
  return text.str();
}

// yaml-cpp's Load reads the first document only: whatever follows a `---` would be dropped
// without a word; its LoadAll never returns on some malformed inputs (the fuzzer found one). So
// the documents are told apart in the text: `---` (a document start) and `...` (an end) stand at
// column 0 and YAML forbids them inside scalars. A document with content (not blank lines,
// comments or markers) after the first is refused at its `---`; an empty one (a trailing `---`)
// holds nothing to drop.
void reject_more_documents(const std::string& text, const std::string& name) {
  int doc = 0, line = 0, marker_line = 0;
  bool opened = false, has_content = false, ended = false;
  auto content = [&] {
    if (ended) {  // a bare document after `...`
      ++doc;
      marker_line = line;
      ended = false;
    }
    if (doc > 0)
      throw UserError(name + ":" + std::to_string(marker_line + 1) +
                      ": a second YAML document (after ---): a config file holds one mapping; "
                      "put its keys in the first, or in a file named by extends:");
    has_content = true;
  };
  auto is_content = [](std::string_view rest) {
    const size_t first = rest.find_first_not_of(" \t");
    return first != std::string_view::npos && rest[first] != '#';
  };
  for (size_t at = 0; at < text.size(); ++line) {
    const size_t eol = std::min(text.find('\n', at), text.size());
    std::string_view l(text.data() + at, eol - at);
    at = eol + 1;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    const bool marker = l.size() >= 3 && (l.substr(0, 3) == "---" || l.substr(0, 3) == "...") &&
                        (l.size() == 3 || l[3] == ' ' || l[3] == '\t');
    if (marker && l[0] == '.') {
      ended = true;
      continue;
    }
    if (marker) {
      if (opened || has_content || ended) {
        ++doc;
        marker_line = line;
        has_content = ended = false;
      }
      opened = true;
      if (is_content(l.substr(3))) content();  // "--- {model: ...}"
      continue;
    }
    if (is_content(l)) content();
  }
}

YAML::Node parse_file(const fs::path& file) {
  check_config_file(file, "");
  const std::string text = read_config_text(file);
  check_utf8(text, file.string());
  try {
    reject_more_documents(text, file.string());
    const YAML::Node doc = YAML::Load(text);
    if (doc.IsNull()) return YAML::Node(YAML::NodeType::Map);
    if (!doc.IsMap()) throw UserError(file.string() + ": the top level must be a mapping of sections");
    reject_duplicate_keys(doc, "", file.string(), true);
    return doc;
  } catch (const YAML::ParserException& e) {
    throw UserError(location(file.string(), e.mark) + ": YAML syntax error: " + e.msg);
  }
}

// A key with no value (`lr:`, or a section whose keys are all commented out) would replace
// the inherited value by nothing, which reads as the built-in default: refused instead.
void reject_empty_values(const YAML::Node& node, const std::string& prefix, const std::string& file) {
  if (!node.IsMap()) return;
  for (const auto& kv : node) {
    const std::string path = prefix.empty() ? kv.first.Scalar() : prefix + "." + kv.first.Scalar();
    if (kv.second.IsNull())
      throw UserError(location(file, kv.first.Mark()) + ": " + path +
                      ": no value (write one, or remove the key to keep the inherited value)");
    reject_empty_values(kv.second, path, file);
  }
}

// `loaded`: files already merged. A file reached again through another branch of extends
// (A extends B and C, both extend D) is merged once, where first reached: merging D again
// after B would undo what B changed in it.
void load_into(const fs::path& file, YamlTree& tree, std::set<fs::path>& stack, std::set<fs::path>& loaded) {
  std::error_code ec;
  fs::path canon = fs::weakly_canonical(file, ec);
  if (ec) canon = file.lexically_normal();
  if (stack.count(canon)) throw UserError(file.string() + ": extends cycle through this file");
  if (loaded.count(canon)) return;
  stack.insert(canon);
  YAML::Node node = parse_file(file);
  reject_empty_values(node, "", file.string());
  if (node["extends"]) {
    const YAML::Node ext = node["extends"];
    std::vector<std::string> bases;
    if (ext.IsScalar()) {
      bases.push_back(ext.Scalar());
    } else if (ext.IsSequence()) {
      for (const auto& b : ext) {
        if (!b.IsScalar() || b.Scalar().empty())
          throw UserError(location(file.string(), b.Mark()) + ": extends: each entry must be a file name");
        bases.push_back(b.Scalar());
      }
    } else {
      throw UserError(location(file.string(), ext.Mark()) + ": extends must be a file name or a list of them");
    }
    for (const auto& base : bases) {
      const fs::path base_path = file.parent_path() / base;
      check_config_file(base_path, location(file.string(), ext.Mark()) + ": extends: ");
      load_into(base_path, tree, stack, loaded);
    }
    node.remove("extends");
  }
  merge_into(tree.root, node);
  record_origins(node, "", file.string(), tree.origins);
  stack.erase(canon);
  loaded.insert(canon);
}

}  // namespace

YamlTree load_tree(const fs::path& file) {
  YamlTree tree;
  std::set<fs::path> stack, loaded;
  load_into(file, tree, stack, loaded);
  return tree;
}

YamlTree tree_from_text(const std::string& text, const std::string& name) {
  YamlTree tree;
  try {
    YAML::Node node = YAML::Load(text);
    if (!node.IsMap()) throw UserError(name + ": the top level must be a mapping of sections");
    reject_duplicate_keys(node, "", name, true);
    merge_into(tree.root, node);
    record_origins(node, "", name, tree.origins);
  } catch (const YAML::ParserException& e) {
    throw UserError(location(name, e.mark) + ": YAML syntax error: " + e.msg);
  }
  return tree;
}

void merge_tree(YamlTree& dst, const YamlTree& src) {
  merge_into(dst.root, src.root);
  for (const auto& kv : src.origins) dst.origins[kv.first] = kv.second;
}

namespace {

// How a --set names itself in messages: as typed, control characters and bytes that are not
// UTF-8 escaped (one line).
std::string set_label(const std::string& assignment) { return "--set " + escape_for_message(assignment); }

// "a.b.c" -> {a, b, c}. An empty segment ("model..hidden", ".x", "x.") would create a key
// named "" that no section has.
std::vector<std::string> split_key_path(const std::string& path, const std::string& label) {
  std::vector<std::string> keys;
  size_t start = 0;
  while (true) {
    const auto dot = path.find('.', start);
    keys.push_back(path.substr(start, dot - start));
    if (keys.back().empty()) throw UserError(label + ": empty key segment in '" + path + "'");
    if (dot == std::string::npos) return keys;
    start = dot + 1;
  }
}

// `path` and everything below it now come from `label`: origins that the files recorded there
// would blame the file for what the --set wrote.
void set_origin(std::map<std::string, std::string>& origins, const std::string& path, const std::string& label) {
  const std::string below = path + ".";
  for (auto it = origins.lower_bound(below); it != origins.end() && it->first.compare(0, below.size(), below) == 0;)
    it = origins.erase(it);
  origins[path] = label;
}

// The value of a --set, parsed as YAML (so 3, 1e-4, true, [a, b] work).
YAML::Node parse_set_value(const std::string& value_text, const std::string& path, const std::string& label) {
  // `key=` (what a shell makes of key="") is the empty string: a string key takes it, any other
  // key refuses it by type. An explicit null or ~ would read as the default: refused.
  YAML::Node value(value_text);
  try {
    if (value_text.find_first_not_of(" \t") != std::string::npos) value = YAML::Load(value_text);
  } catch (const YAML::ParserException& e) {
    throw UserError(label + ": cannot parse the value: " + e.msg);
  }
  if (value.IsNull()) throw UserError(label + ": no value (null reads as the default)");
  reject_duplicate_keys(value, path, label, false);
  return value;
}

}  // namespace

void apply_override(YamlTree& tree, const std::string& assignment) {
  // Checked before the label is built: the label would carry the bad bytes into the message.
  if (const size_t bad = find_invalid_utf8(assignment); bad != std::string::npos)
    throw UserError(set_label(assignment.substr(0, bad)) + "...: not UTF-8 text (byte offset " +
                    std::to_string(bad) + " of the assignment)");
  const std::string label = set_label(assignment);
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) throw UserError(label + ": expected key.path=value");
  const std::string path = assignment.substr(0, eq);
  const std::vector<std::string> keys = split_key_path(path, label);
  const YAML::Node value = parse_set_value(assignment.substr(eq + 1), path, label);
  // Walk/create the parent maps. yaml-cpp nodes are handles, so assigning to `node`
  // rebinds rather than writes; keep a vector of handles instead.
  std::vector<YAML::Node> chain{tree.root};
  std::string prefix;
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    prefix += (i ? "." : "") + keys[i];
    YAML::Node next = chain.back()[keys[i]];
    if (!next || !next.IsMap()) {
      // A new section, or a value replaced by a mapping (model.hidden.x=3): this --set's doing.
      chain.back()[keys[i]] = YAML::Node(YAML::NodeType::Map);
      next = chain.back()[keys[i]];
      set_origin(tree.origins, prefix, label);
    }
    chain.push_back(next);
  }
  chain.back()[keys.back()] = value;
  set_origin(tree.origins, path, label);
}

bool assignment_sets(const std::string& assignment, const std::string& key_path) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  const std::string path = assignment.substr(0, eq);
  if (path == key_path || path.rfind(key_path + ".", 0) == 0) return true;  // it, or a key below it
  if (key_path.rfind(path + ".", 0) != 0) return false;  // `path` is not a section above key_path
  try {
    // Walk down through const nodes, each step a new Node: a non-const operator[] may add the
    // key, and assigning one Node to another rebinds what it refers to.
    std::vector<YAML::Node> chain{YAML::Load(assignment.substr(eq + 1))};
    for (const auto& key : split_key_path(key_path.substr(path.size() + 1), assignment)) {
      const YAML::Node& node = chain.back();
      if (!node.IsMap()) return false;
      chain.push_back(node[key]);
      if (!chain.back().IsDefined()) return false;
    }
    return true;
  } catch (const std::exception&) {  // unparsable: load_config names the fault
    return false;
  }
}

}  // namespace rpe::config_detail
