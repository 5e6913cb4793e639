// rpe-train methods: the registered position methods, their options and one-line summaries,
// as the registry states them (model/attention/registry.cpp). Scripts ask `methods --names`
// instead of keeping their own lists; with names given it prints each one's registry name
// (the paper's method4 -> m4), or fails (exit 2) on an unknown one.
#include <algorithm>
#include <iostream>

#include "cli/commands.h"
#include "model/attention/registry.h"
#include "util/errors.h"

namespace rpe::cli {
namespace {

void print_table() {
  std::cout << "Position methods (model.attention.method; presets: configs/pretrain/<scale>_<method>.yaml):\n";
  for (const MethodInfo& m : position_methods()) {
    std::string name = m.name;
    if (!m.aliases.empty()) name += " (" + join(m.aliases) + ")";
    auto keys = method_option_keys(m.name);
    std::cout << "\n  " << name << "\n    " << m.summary << "\n    options: model.attention."
              << (keys.empty() ? std::string("add_absolute") : join(keys) + ", add_absolute") << "\n";
    std::string facts;
    if (m.learned_absolute) facts += "inputs limited to model.max_position; ";
    if (!m.hf_type.empty()) facts += "Hugging Face position_embedding_type " + m.hf_type + "; ";
    if (!m.zero_is_neutral) facts += "method swap starts from its own neutral init; ";
    if (!facts.empty()) std::cout << "    " << facts.substr(0, facts.size() - 2) << "\n";
  }
}

}  // namespace

void add_methods(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("methods", "List the position methods with their options (--names: one per line)");
  auto names_only = std::make_shared<bool>(false);
  auto names = std::make_shared<std::vector<std::string>>();
  cmd->add_flag("--names", *names_only, "Print registry names only, one per line (for scripts)");
  cmd->add_option("name", *names, "With --names: print these methods' registry names (aliases resolved), in order");
  cmd->callback([&run, names_only, names] {
    run = [names_only, names] {
      if (!*names_only) {
        if (!names->empty()) throw UserError("methods: method names are read with --names only");
        print_table();
        return 0;
      }
      if (names->empty()) *names = attention_method_names();
      for (const auto& n : *names) std::cout << method_info(n).name << "\n";  // UserError for an unknown name
      return 0;
    };
  });
}

}  // namespace rpe::cli
