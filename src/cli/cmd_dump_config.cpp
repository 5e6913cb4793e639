// rpe-train dump-config: prints the fully resolved config (extends + --set applied), or with
// --shell a settings file's keys as bash assignments (configs/reproduce/, read by scripts).
#include <iostream>

#include "cli/commands.h"
#include "config/config.h"
#include "config/shell_vars.h"
#include "util/errors.h"

namespace rpe::cli {

void add_dump_config(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("dump-config", "Print the resolved config (defaults < files < --set)");
  auto file = std::make_shared<std::string>();
  auto sets = std::make_shared<std::vector<std::string>>();
  auto shell = std::make_shared<bool>(false);
  cmd->add_option("--config", *file, "Experiment YAML file")->required();
  cmd->add_option("--set", *sets, "Override a key: a.b.c=value (repeatable)");
  cmd->add_flag("--shell", *shell,
                "Print the file's top-level keys as bash assignments (KEY='v', KEY=('a' 'b')); no experiment schema");
  cmd->callback([&run, file, sets, shell] {
    run = [file, sets, shell] {
      if (*shell) {
        if (!sets->empty()) throw UserError("dump-config --shell: --set does not apply to a settings file");
        std::cout << shell_assignments(*file);
        return 0;
      }
      std::cout << to_yaml(load_config(*file, *sets));
      return 0;
    };
  });
}

}  // namespace rpe::cli
