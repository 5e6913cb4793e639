// rpe-train dump-config: prints the fully resolved config (extends + --set applied).
#include <iostream>

#include "cli/commands.h"
#include "config/config.h"

namespace rpe::cli {

void add_dump_config(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("dump-config", "Print the resolved config (defaults < files < --set)");
  auto file = std::make_shared<std::string>();
  auto sets = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--config", *file, "Experiment YAML file")->required();
  cmd->add_option("--set", *sets, "Override a key: a.b.c=value (repeatable)");
  cmd->callback([&run, file, sets] {
    run = [file, sets] {
      std::cout << to_yaml(load_config(*file, *sets));
      return 0;
    };
  });
}

}  // namespace rpe::cli
