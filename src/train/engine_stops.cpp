// The engine's stops (see engine.h): the non-finite guard's bookkeeping of a skipped step and
// its stop after too many, the stop of every rank when a rank's gradient sync refused a step,
// and the stop a signal asks for.
#include <fmt/format.h>

#include <cmath>
#include <chrono>
#include <stdexcept>

#include "dist/all_or_none.h"
#include "train/engine.h"
#include "util/errors.h"
#include "util/log.h"
#include "util/stop_signals.h"

namespace rpe {
using Clock = std::chrono::steady_clock;

void Engine::stop_if_refused(int64_t step, const torch::Tensor& refused) {
  if (!refused.defined() || !(refused.item<double>() > 0.0)) return;
  // Every rank saw the refusal in the same step's statistics: one agreement, which throws the
  // refusing rank's own error there (given the step the others name) and "rank R stopped while
  // ...: <its reason>" elsewhere.
  const std::string what = "syncing the gradients of step " + std::to_string(step);
  const auto refusal = s_.dp->gradient_sync_refusal();
  try {
    dist::agree_all_succeeded(*s_.dp, what, refusal);
  } catch (const std::runtime_error& e) {
    if (!refusal) throw;
    throw std::runtime_error(what + ": " + e.what());
  }
  throw std::logic_error(what + ": a rank refused the gradients but none holds the reason");
}

std::string Engine::note_nonfinite(int64_t step, const torch::Tensor& loss_t, const torch::Tensor& grad_norm,
                                   const torch::Tensor& overflow, const torch::Tensor& scale, TrainState& state) {
  ++state.nonfinite_total;
  const double loss = loss_t.item<double>(), gnorm = grad_norm.item<double>();
  // A non-finite loss is the forward pass's own, which no loss scale causes: a divergence.
  if (overflow.defined() && std::isfinite(loss) && overflow.item<float>() > 0.0f) {
    // fp16: the gradients overflowed at this loss scale, which has halved; routine while the
    // scale finds its level, a divergence only when no scale is small enough. (Finite
    // gradients whose norm overflows fp32 are no such case: S did not move, and they count
    // towards max_nonfinite_in_a_row below.)
    const double now = scale[0].item<double>();
    log::info(s_.log_tag.c_str(), "step {}: fp16 gradient overflow, update skipped, loss scale -> {:g} ({} skipped in total)",
              step, now, state.nonfinite_total);
    record({{"step", step}, {"event", "overflow_skip"}, {"loss", loss}, {"loss_scale", now},
            {"nonfinite_total", state.nonfinite_total}}, step);
    if (now >= s_.train.min_loss_scale) return "";
    return fmt::format("the fp16 gradients overflow at every loss scale down to {:g} (train.min_loss_scale {:g})", now,
                       s_.train.min_loss_scale);
  }
  ++state.nonfinite_in_a_row;
  log::warn(s_.log_tag.c_str(), "step {}: non-finite {} ({}), update skipped ({} in a row, {} in total)", step,
            std::isfinite(loss) ? "gradient norm" : "loss", std::isfinite(loss) ? gnorm : loss,
            state.nonfinite_in_a_row, state.nonfinite_total);
  record({{"step", step}, {"event", "nonfinite_skip"}, {"loss", loss}, {"grad_norm", gnorm},
          {"nonfinite_in_a_row", state.nonfinite_in_a_row}, {"nonfinite_total", state.nonfinite_total}}, step);
  if (state.nonfinite_in_a_row < s_.train.max_nonfinite_in_a_row) return "";
  return std::to_string(state.nonfinite_in_a_row) +
         " non-finite losses or gradient norms in a row (train.max_nonfinite_in_a_row)";
}

void Engine::stop_nonfinite(TrainState& state, const LogWindow& w, const std::string& why) {
  s_.dp->barrier();
  const auto file = save(state, w);  // throws if the weights themselves are non-finite
  throw UserError("training stopped at step " + std::to_string(state.step) + ": " + why + "; the weights "
                  "(finite, from the last update that was not skipped) " +
                  (file.empty() ? std::string("are not kept") : "are kept in " + file.string()) +
                  " (lower train.lr, raise warmup_steps, or use precision fp32)");
}

std::optional<Clock::time_point> time_limit_deadline(const TrainOptions& t, Clock::time_point start) {
  if (t.time_limit_min <= 0) return std::nullopt;
  return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t.time_limit_min * 60));
}

bool Engine::has_time_limit() const { return s_.stop_at && !s_.run_dir.empty(); }
bool Engine::past_time_limit() const { return has_time_limit() && Clock::now() >= *s_.stop_at; }

bool Engine::asks_to_stop(bool time_counts) const {
  return StopSignals::requested() != 0 || (time_counts && past_time_limit());
}

bool Engine::a_rank_asks_to_stop(bool time_counts) { return can_stop_ && s_.dp->any(asks_to_stop(time_counts)); }

void Engine::stop_on_request(TrainState& state, const LogWindow& w) {
  s_.dp->barrier();
  const auto file = saved_step_ == state.step ? saved_file_ : save(state, w);
  const int own = StopSignals::requested();
  // Every rank is here, after the same step: one reason for all, so that every rank ends alike
  // (a job script reads one exit code): a signal anywhere, else the time limit.
  const bool signalled = s_.dp->any(own != 0);
  const std::string why = signalled ? StopSignals::reason(own)
                                    : fmt::format("at the time limit (train.time_limit_min {:g})", s_.train.time_limit_min);
  const std::string message = fmt::format("stopped {} after step {} of {}; checkpoint {}; {}", why, state.step,
                                          s_.train.max_steps, file.string(), s_.resume_hint);
  log::info(s_.log_tag.c_str(), "{}", message);
  throw StopRequested(message, signalled ? StopSignals::ends_by(own) : 0);
}

}  // namespace rpe
