// Subcommands of rpe-train: each file adds its own CLI11 subcommand and its handler.
#pragma once
#include <CLI/CLI.hpp>

#include <functional>

namespace rpe::cli {

// Registers a subcommand on `app`; the returned function runs it (exit code).
using Runner = std::function<int()>;
// Prints versions and devices (rpe-train --version).
int print_version();
// For a command whose stdout is data scripts read (dump-config, inspect --max-length): no log
// line goes there (logs go to stdout, util/log.h; the one-line error still goes to stderr).
void silence_logs();
void add_dump_config(CLI::App& app, Runner& run);
void add_pretrain(CLI::App& app, Runner& run);
void add_tokenize(CLI::App& app, Runner& run);
void add_prepare_data(CLI::App& app, Runner& run);
void add_train_tokenizer(CLI::App& app, Runner& run);
void add_import_hf(CLI::App& app, Runner& run);
void add_export_hf(CLI::App& app, Runner& run);
void add_inspect(CLI::App& app, Runner& run);
void add_swap_method(CLI::App& app, Runner& run);
void add_finetune(CLI::App& app, Runner& run);
void add_predict(CLI::App& app, Runner& run);
void add_tables(CLI::App& app, Runner& run);
void add_evaluate(CLI::App& app, Runner& run);
void add_methods(CLI::App& app, Runner& run);

}  // namespace rpe::cli
