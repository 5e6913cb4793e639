// Config names: where `--config NAME` is looked up, and pretraining presets composed from a
// scale and a position method (configs/pretrain/README.md).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "config/yaml_tree.h"

namespace rpe {

// Folders a plain config name (no folder part) is looked up in, in order: the working
// directory, its configs/pretrain/ and configs/finetune/, then the configs/pretrain/ and
// configs/finetune/ of the repository or install the running binary belongs to
// (<binary>/../configs, <binary>/../share/rpe-train/configs), where those exist.
std::vector<std::filesystem::path> config_search_path();

namespace config_detail {

// Loads a config as load_tree does, resolving its name first. A name with a folder part is
// looked up in that folder only; a plain name along config_search_path(). In each folder:
//   NAME, NAME.yaml                      an existing file;
//   <scale>_<method>[.yaml]              composed when <scale>.yaml is there: that file, then
//                                        ../attention/<method>.yaml, with model.attention.method
//                                        <method> and run.name <scale>_<method>. <method> is a
//                                        registered name or alias (method4 = m4).
// UserError "config file not found: NAME (...)" when nothing matches.
YamlTree load_named_tree(const std::filesystem::path& name);

}  // namespace config_detail
}  // namespace rpe
