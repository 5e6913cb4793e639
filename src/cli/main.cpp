// rpe-train entry point: parses the command line and dispatches to one subcommand.
// User errors (bad config, missing files, bad data) print one line and exit with 2.
#include <c10/util/Exception.h>

#include <iostream>

#include "cli/commands.h"
#include "util/cpu_memory.h"
#include "util/errors.h"
#include "util/log.h"

int main(int argc, char** argv) {
  CLI::App app{"rpe-train: BERT pretraining and fine-tuning with pluggable position embeddings"};
  app.require_subcommand(0, 1);
  app.failure_message([](const CLI::App*, const CLI::Error& e) { return std::string("error: ") + e.what() + "\n"; });
  bool version = false;
  app.add_flag("--version", version, "Print rpe-train, LibTorch and CUDA versions and the devices seen");
  rpe::cli::Runner run;
  rpe::cli::add_pretrain(app, run);
  rpe::cli::add_dump_config(app, run);
  rpe::cli::add_tokenize(app, run);
  rpe::cli::add_prepare_data(app, run);
  rpe::cli::add_train_tokenizer(app, run);
  rpe::cli::add_import_hf(app, run);
  rpe::cli::add_export_hf(app, run);
  rpe::cli::add_inspect(app, run);
  rpe::cli::add_swap_method(app, run);
  rpe::cli::add_finetune(app, run);
  rpe::cli::add_tables(app, run);
  rpe::cli::add_evaluate(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : rpe::kExitUserError;
  }
  rpe::log::init();
  rpe::keep_freed_host_memory();
  try {
    if (version) return rpe::cli::print_version();
    if (!run) {
      std::cout << app.help();
      return rpe::kExitUserError;
    }
    return run();
  } catch (const rpe::UserError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return rpe::kExitUserError;
  } catch (const c10::Error& e) {
    std::cerr << "error: LibTorch: " << e.what_without_backtrace() << "\n";
    return 1;
  }
}
