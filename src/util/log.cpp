// Tagged spdlog wrapper: console sink always, file sink once a run folder exists.
#include "util/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <algorithm>

namespace rpe::log {

void init(bool quiet) {
  // Logs go to stdout so that stderr carries only the one-line error of a failed command.
  auto console = std::make_shared<spdlog::sinks::stdout_color_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("rpe", console);
  logger->set_pattern("%H:%M:%S %^%l%$ %v");
  logger->set_level(quiet ? spdlog::level::warn : spdlog::level::info);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

FileSink::FileSink(const std::filesystem::path& file) {
  if (file.empty()) return;
  sink_ = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file.string(), /*truncate=*/false);
  sink_->set_pattern("%Y-%m-%d %H:%M:%S.%e %l %v");
  spdlog::default_logger()->sinks().push_back(sink_);
}

void FileSink::close() {
  if (!sink_) return;
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  sink_.reset();
}

void set_rank(int rank) {
  if (rank != 0) spdlog::default_logger()->set_level(spdlog::level::warn);
}

}  // namespace rpe::log
