// Typed config reading and dumping, driven by each section's visit(); validation is in validate.cpp.
#include "config/config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <type_traits>
#include <utility>
#include <vector>

#include "config/config_names.h"
#include "config/method_catalogue.h"
#include "config/yaml_tree.h"
#include "util/errors.h"

namespace rpe {

namespace {
using config_detail::YamlTree;

template <class T> const char* type_name() {
  if constexpr (std::is_same_v<T, bool>) return "true or false";
  else if constexpr (std::is_integral_v<T>) return "an integer";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else if constexpr (std::is_same_v<T, std::string>) return "a string";
  else return "a list";
}

// Reads a YAML map into a section, strictly.
class Reader {
 public:
  Reader(const YAML::Node& node, std::string prefix, const Config& cfg)
      : node_(node), prefix_(std::move(prefix)), cfg_(cfg) {}

  template <class T> void operator()(const char* key, T& field, bool required = false) {
    seen_.insert(key);
    const std::string path = prefix_.empty() ? key : prefix_ + "." + key;
    const YAML::Node found = node_[key];
    constexpr bool is_section = requires { field.template visit<Reader>(std::declval<Reader&>()); };
    const bool missing = !found || found.IsNull();
    if (missing) {
      if (required) cfg_.fail(path, "missing required key");
      if constexpr (!is_section) return;
    }
    // An absent section is read as an empty one, so its own required keys are still checked.
    // (yaml-cpp's Node::operator= writes through the handle, hence a second node.)
    const YAML::Node empty(YAML::NodeType::Map);
    const YAML::Node& value = missing ? empty : found;
    if constexpr (is_section) {
      if (!value.IsMap()) cfg_.fail(path, "expected a mapping of keys");
      Reader sub(value, path, cfg_);
      field.visit(sub);
      sub.reject_unknown();
    } else {
      read_scalar(path, value, field);
    }
  }

  // Every key in the YAML map must have been visited.
  void reject_unknown() const {
    std::vector<std::string> valid(seen_.begin(), seen_.end());
    for (const auto& kv : node_) {
      const std::string key = kv.first.Scalar();
      if (!seen_.count(key)) {
        const std::string path = prefix_.empty() ? key : prefix_ + "." + key;
        cfg_.fail(path, "unknown key (valid keys here: " + join(valid) + ")");
      }
    }
  }

 private:
  template <class T> void read_scalar(const std::string& path, const YAML::Node& value, T& field) {
    if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      field.clear();
      if (value.IsScalar()) {  // a single file name is accepted for a list
        field.push_back(value.Scalar());
        return;
      }
      if (!value.IsSequence()) cfg_.fail(path, "expected a list of strings");
      for (const auto& item : value) {
        if (!item.IsScalar()) cfg_.fail(path, "expected a list of strings");
        field.push_back(item.Scalar());
      }
    } else {
      if (!value.IsScalar()) cfg_.fail(path, std::string("expected ") + type_name<T>());
      const std::string text = value.Scalar();
      T parsed{};
      bool ok = YAML::convert<T>::decode(value, parsed);
      if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        // yaml-cpp happily truncates "1.5" to 1; integers must look like integers.
        ok = ok && text.find_first_of(".eE") == std::string::npos;
      }
      if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) reject_leading_zero(path, text);
      if (!ok) cfg_.fail(path, std::string("expected ") + type_name<T>() + ", got '" + text + "'");
      field = parsed;
    }
  }

  // yaml-cpp reads an integer with a leading zero as octal (032 = 26, as YAML 1.1 does), a
  // double as decimal (032 = 32.0) and 09 as no integer at all: one text, several answers,
  // none announced. Refused: a sign, a 0, then only digits. 0, 0.5, 0e0 and 0x20 still read.
  void reject_leading_zero(const std::string& path, const std::string& text) const {
    const size_t digits = text.find_first_not_of("+-") == 1 ? 1 : 0;
    if (text.size() < digits + 2 || text[digits] != '0') return;
    if (text.find_first_not_of("0123456789", digits) != std::string::npos) return;
    const size_t first = text.find_first_not_of('0', digits);
    const std::string sign = text[0] == '-' ? "-" : "";
    const std::string plain = first == std::string::npos ? "0" : sign + text.substr(first);
    cfg_.fail(path, text + ": a leading zero is ambiguous (octal in YAML 1.1); write " + plain);
  }

  const YAML::Node& node_;
  std::string prefix_;
  const Config& cfg_;
  std::set<std::string> seen_;
};

// Emits a section as YAML, in declaration order.
// Numbers as the shortest text that reads back as the same double (lr: 0.0005), or, for
// to_flat_text, with 17 significant digits (lr: 0.00050000000000000001): the reproduction
// scripts' stamps of existing runs were written in that form and compare it as text.
class Writer {
 public:
  Writer(YAML::Emitter& out, bool shortest) : out_(out), shortest_(shortest) {}
  template <class T> void operator()(const char* key, T& field, bool = false) {
    out_ << YAML::Key << key << YAML::Value;
    if constexpr (requires { field.template visit<Writer>(std::declval<Writer&>()); }) {
      out_ << YAML::BeginMap;
      field.visit(*this);
      out_ << YAML::EndMap;
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      out_ << YAML::Flow << field;
    } else if constexpr (std::is_floating_point_v<T>) {
      if (shortest_ && std::isfinite(field)) out_ << fmt::format("{}", field);
      else out_ << YAML::Precision(17) << field;
    } else {
      out_ << field;
    }
  }

 private:
  YAML::Emitter& out_;
  bool shortest_;
};

Config read_tree(const YamlTree& tree) {
  Config cfg;
  cfg.origins = tree.origins;
  Reader reader(tree.root, "", cfg);
  cfg.visit(reader);
  reader.reject_unknown();
  // The paper's names (method4) are read as the registry's (m4): runs, tables and
  // checkpoints carry one spelling.
  if (const MethodFacts* m = find_method_facts(cfg.model.attention.method)) cfg.model.attention.method = m->name;
  validate(cfg);
  return cfg;
}

}  // namespace

std::string Config::where(const std::string& key_path) const {
  std::string path = key_path;
  while (!path.empty()) {
    auto it = origins.find(path);
    if (it != origins.end()) return it->second;
    const auto dot = path.rfind('.');
    if (dot == std::string::npos) break;
    path = path.substr(0, dot);
  }
  return origins.count("") ? origins.at("") : "config";
}

void Config::fail(const std::string& key_path, const std::string& message) const {
  throw UserError(where(key_path) + ": " + key_path + ": " + message);
}

Config load_config(const std::filesystem::path& file, const std::vector<std::string>& overrides) {
  YamlTree tree = config_detail::load_named_tree(file);
  tree.origins[""] = file.string();
  for (const auto& o : overrides) config_detail::apply_override(tree, o);
  return read_tree(tree);
}

Config load_config_over(const std::string& base_yaml, const std::string& base_name,
                        const std::vector<std::string>& keep_sections, const std::filesystem::path& file,
                        const std::vector<std::string>& overrides, const std::vector<std::string>& keep_keys) {
  YamlTree tree = config_detail::tree_from_text(base_yaml, base_name);
  std::vector<std::pair<std::string, YAML::Node>> kept;  // keep_keys the base has: "section.key" -> value
  for (const auto& dotted : keep_keys) {
    const auto dot = dotted.find('.');
    const YAML::Node& root = tree.root;  // const: reading a missing key must not add it
    const YAML::Node section = root[dotted.substr(0, dot)];
    if (section.IsMap() && section[dotted.substr(dot + 1)])
      kept.emplace_back(dotted, YAML::Clone(section[dotted.substr(dot + 1)]));
  }
  std::vector<std::string> drop;
  for (const auto& kv : tree.root)
    if (std::find(keep_sections.begin(), keep_sections.end(), kv.first.Scalar()) == keep_sections.end())
      drop.push_back(kv.first.Scalar());
  for (const auto& key : drop) tree.root.remove(key);
  for (const auto& [dotted, value] : kept) {
    const auto dot = dotted.find('.');
    tree.root[dotted.substr(0, dot)][dotted.substr(dot + 1)] = value;
  }
  config_detail::merge_tree(tree, config_detail::load_named_tree(file));
  tree.origins[""] = file.string();
  for (const auto& o : overrides) config_detail::apply_override(tree, o);
  return read_tree(tree);
}

Config config_from_yaml(const std::string& yaml_text, const std::string& name) {
  YamlTree tree = config_detail::tree_from_text(yaml_text, name);
  tree.origins[""] = name;
  return read_tree(tree);
}

namespace {
std::string emit_yaml(const Config& cfg, bool shortest_numbers) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  Writer writer(out, shortest_numbers);
  const_cast<Config&>(cfg).visit(writer);  // Writer only reads the fields
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}
}  // namespace

std::string to_yaml(const Config& cfg) { return emit_yaml(cfg, /*shortest_numbers=*/true); }

namespace {
// Every leaf of `node` as (key path, value in flow style), in document order.
void flatten(const YAML::Node& node, const std::string& path, std::vector<std::pair<std::string, std::string>>& out) {
  if (node.IsMap()) {
    for (const auto& kv : node) flatten(kv.second, path.empty() ? kv.first.Scalar() : path + "." + kv.first.Scalar(), out);
    return;
  }
  YAML::Emitter value;
  value << YAML::Flow << node;
  out.emplace_back(path, value.c_str());
}
}  // namespace

bool assignment_sets(const std::string& assignment, const std::string& key_path) {
  return config_detail::assignment_sets(assignment, key_path);
}

namespace {
std::vector<std::pair<std::string, std::string>> flat_values(const Config& cfg, bool shortest_numbers) {
  std::vector<std::pair<std::string, std::string>> out;
  flatten(YAML::Load(emit_yaml(cfg, shortest_numbers)), "", out);
  return out;
}
}  // namespace

std::string to_flat_text(const Config& cfg) {
  std::string out;
  for (const auto& [key, value] : flat_values(cfg, /*shortest_numbers=*/false)) out += key + ": " + value + "\n";
  return out;
}

std::vector<std::string> config_differences(const Config& before, const Config& after) {
  // Shortest number text: one text per double, so equal text is an equal value, and it is the
  // text config.yaml shows (0.0005, not 0.00050000000000000001).
  auto values = [](const Config& cfg) {
    const auto flat = flat_values(cfg, /*shortest_numbers=*/true);
    return std::map<std::string, std::string>(flat.begin(), flat.end());
  };
  const auto a = values(before), b = values(after);
  std::vector<std::string> changes;
  for (const auto& [key, was] : a) {
    const auto now = b.find(key);
    if (now == b.end()) changes.push_back(key + ": " + was + " -> (none)");
    else if (now->second != was) changes.push_back(key + ": " + was + " -> " + now->second);
  }
  for (const auto& [key, now] : b)
    if (!a.count(key)) changes.push_back(key + ": (none) -> " + now);
  return changes;
}

}  // namespace rpe
