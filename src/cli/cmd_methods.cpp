// rpe-train methods: the registered position methods, their options and one-line summaries,
// as the registry states them (model/attention/registry.cpp). Scripts ask `methods --names`
// instead of keeping their own lists; with names given it prints each one's registry name
// (the paper's method4 -> m4), or fails (exit 2) on an unknown one; --paper-table 2|3 keeps the
// methods the paper's Table 2 (SQuAD) or 3 (GLUE) reports, so scripts ask for those too.
#include <algorithm>
#include <iostream>
#include <set>

#include "cli/commands.h"
#include "eval/paper_numbers.h"
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

// The methods with a row in the paper's Table 2 or 3 (Devlin et al.'s "bert" row is no method of ours).
template <typename Rows>
std::set<std::string> reported(const Rows& rows) {
  std::set<std::string> out;
  for (const auto& r : rows) out.insert(r.method);
  return out;
}

}  // namespace

void add_methods(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("methods", "List the position methods with their options (--names: one per line)");
  auto names_only = std::make_shared<bool>(false);
  auto names = std::make_shared<std::vector<std::string>>();
  auto table = std::make_shared<int>(0);
  cmd->add_flag("--names", *names_only, "Print registry names only, one per line (for scripts)");
  cmd->add_option("name", *names, "With --names: print these methods' registry names (aliases resolved), in order");
  cmd->add_option("--paper-table", *table, "With --names: only the methods the paper's Table 2 (SQuAD) or 3 (GLUE) reports")
      ->check(CLI::IsMember({2, 3}));
  cmd->callback([&run, names_only, names, table] {
    run = [names_only, names, table] {
      if (!*names_only) {
        if (!names->empty() || *table) throw UserError("methods: method names and --paper-table are read with --names only");
        print_table();
        return 0;
      }
      if (names->empty()) *names = attention_method_names();
      const auto rows = *table == 2 ? reported(eval::paper::kTable2) : reported(eval::paper::kTable3);
      for (const auto& n : *names) {
        const std::string name = method_info(n).name;  // UserError for an unknown name
        if (!*table || rows.count(name)) std::cout << name << "\n";
      }
      return 0;
    };
  });
}

}  // namespace rpe::cli
