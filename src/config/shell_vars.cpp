// YAML settings as bash assignments (see shell_vars.h).
#include "config/shell_vars.h"

#include <cctype>

#include "config/config_names.h"
#include "util/errors.h"

namespace rpe {

namespace {

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool shell_name(const std::string& key) {
  if (key.empty() || std::isdigit(static_cast<unsigned char>(key[0]))) return false;
  for (unsigned char c : key)
    if (!std::isalnum(c) && c != '_') return false;
  return true;
}

}  // namespace

std::string shell_assignments(const std::filesystem::path& file) {
  const config_detail::YamlTree tree = config_detail::load_named_tree(file);
  std::string out;
  for (const auto& kv : tree.root) {
    const std::string key = kv.first.Scalar();
    auto fail = [&](const std::string& why) { throw UserError(file.string() + ": " + key + ": " + why); };
    if (!shell_name(key)) fail("not a shell variable name (letters, digits, _)");
    std::string name;
    for (unsigned char c : key) name += static_cast<char>(std::toupper(c));
    const YAML::Node& v = kv.second;
    if (v.IsScalar()) {
      out += name + "=" + quoted(v.Scalar()) + "\n";
    } else if (v.IsSequence()) {
      out += name + "=(";
      for (size_t i = 0; i < v.size(); ++i) {
        if (!v[i].IsScalar()) fail("list items must be plain values");
        if (i) out += ' ';
        out += quoted(v[i].Scalar());
      }
      out += ")\n";
    } else if (v.IsNull()) {
      out += name + "=''\n";
    } else {
      fail("expected a value or a list of values");
    }
  }
  return out;
}

}  // namespace rpe
