// Config name resolution and scale x method preset composition (see config_names.h).
#include "config/config_names.h"

#include <system_error>

#include "config/method_catalogue.h"
#include "util/errors.h"

namespace rpe {
namespace fs = std::filesystem;

namespace {

bool present(const fs::path& p) {
  std::error_code ec;
  return fs::symlink_status(p, ec).type() != fs::file_type::not_found && !ec;
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

std::string yaml_name(const std::string& name) {
  return name.size() > 5 && name.compare(name.size() - 5, 5, ".yaml") == 0 ? name : name + ".yaml";
}

}  // namespace

std::vector<fs::path> config_search_path() {
  std::vector<fs::path> dirs{".", "configs/pretrain", "configs/finetune"};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return dirs;
  const fs::path cwd = fs::current_path(ec);
  for (const fs::path& root : {exe.parent_path().parent_path(), exe.parent_path().parent_path() / "share/rpe-train"}) {
    if (!fs::is_directory(root / "configs/pretrain", ec)) continue;
    if (!cwd.empty() && fs::equivalent(root, cwd, ec)) continue;  // already searched
    dirs.push_back(root / "configs/pretrain");
    dirs.push_back(root / "configs/finetune");
  }
  return dirs;
}

namespace config_detail {
namespace {

// <dir>/<scale>_<method>.yaml composed from <dir>/<scale>.yaml and the method's fragment.
// False when `stem` does not split into an existing scale file and a known method.
bool compose_preset(const fs::path& dir, const std::string& stem, YamlTree& tree) {
  for (size_t cut = stem.find('_'); cut != std::string::npos; cut = stem.find('_', cut + 1)) {
    const fs::path scale_file = dir / (stem.substr(0, cut) + ".yaml");
    if (!is_file(scale_file)) continue;
    std::string method = stem.substr(cut + 1);
    if (const MethodFacts* facts = find_method_facts(method)) method = facts->name;
    else if (!method_catalogue().empty()) continue;  // not a method: not a preset name
    tree = load_tree(scale_file);
    const fs::path fragment = dir.parent_path() / "attention" / (method + ".yaml");
    if (is_file(fragment)) merge_tree(tree, load_tree(fragment));
    tree.root["model"]["attention"]["method"] = method;
    tree.root["run"]["name"] = stem.substr(0, cut) + "_" + method;
    const std::string origin = (dir / stem).string() + " (" + scale_file.filename().string() + " + method " + method + ")";
    tree.origins["model.attention.method"] = origin;
    tree.origins["run.name"] = origin;
    return true;
  }
  return false;
}

}  // namespace

YamlTree load_named_tree(const fs::path& name) {
  if (present(name)) return load_tree(name);  // as given (load_tree refuses folders and the like)
  const std::string file = name.filename().string();
  const std::vector<fs::path> dirs =
      name.has_parent_path() ? std::vector<fs::path>{name.parent_path()} : config_search_path();
  std::string stem = file.size() > 5 && file.compare(file.size() - 5, 5, ".yaml") == 0 ? file.substr(0, file.size() - 5) : file;
  for (const auto& dir : dirs) {
    for (const fs::path& candidate : {dir / file, dir / yaml_name(file)})
      if (present(candidate)) return load_tree(candidate);
    YamlTree tree;
    if (compose_preset(dir.empty() ? fs::path(".") : dir, stem, tree)) return tree;
  }
  std::string looked;
  for (const auto& dir : dirs) looked += (looked.empty() ? "" : ", ") + dir.string();
  throw UserError("config file not found: " + name.string() + " (looked in " + looked +
                  "; presets are named <scale>_<method>, see `rpe-train methods`)");
}

}  // namespace config_detail
}  // namespace rpe
