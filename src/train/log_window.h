// The engine's log window: sums over the steps since the last progress line / metrics.jsonl
// row, kept on the device until that row (train/engine.cpp). A checkpoint keeps the part of
// the window its step has seen (TrainState::log_window), so a run resumed from a checkpoint
// between two log steps writes the rows an uninterrupted run writes: the first row after the
// resume averages the whole window, not only the steps since the resume.
#pragma once
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace rpe {

struct LogWindow {
  // [5] float64 on the device, finite steps only but the tokens: loss summed over the items
  // scored (each step's mean loss times its count N, so the window's loss is sums[0] / sums[3]:
  // a step that scored nothing weighs nothing), grad_norm (per step), correct, count N, tokens.
  torch::Tensor sums;
  int64_t finite_steps = 0, skipped = 0;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();  // for tokens/s

  explicit LogWindow(const torch::Device& device)
      : sums(torch::zeros({5}, torch::TensorOptions(torch::kDouble).device(device))) {}

  // What a checkpoint keeps (a host read): [loss, grad_norm, correct, count, finite_steps,
  // skipped, 1]. Not the tokens: they feed only the window's tokens/s, a rate of this process.
  // The last entry marks the loss as summed over items (checkpoints before it kept six entries,
  // the loss summed over steps).
  std::vector<double> snapshot() const {
    const auto h = sums.slice(0, 0, 4).cpu();
    const double* v = h.data_ptr<double>();
    return {v[0], v[1], v[2], v[3], static_cast<double>(finite_steps), static_cast<double>(skipped), 1.0};
  }

  // One step's accuracy counts and tokens, on the device (no host read). The accuracy averages
  // the steps the loss and grad_norm do (finite ones: a skipped step's predictions may come
  // from non-finite logits); tokens/s counts every step's work.
  void add_scored(const torch::Tensor& finite, const torch::Tensor& correct, const torch::Tensor& count,
                  const torch::Tensor& tokens) {
    const auto scored = torch::stack({correct, count});
    sums.slice(0, 2, 4) += torch::where(finite, scored, torch::zeros_like(scored));
    sums.select(0, 4) += tokens;
  }

  // Evaluations and checkpoints inside a window are not training: the time since `t` leaves
  // its tokens/s (the ETA keeps it: they recur).
  void leave_out_since(std::chrono::steady_clock::time_point t) { start += std::chrono::steady_clock::now() - t; }

  // Continues a window from a checkpoint's snapshot (empty: a fresh window).
  void restore(const std::vector<double>& kept) {
    if (kept.size() != 6 && kept.size() != 7) return;
    std::vector<double> v(kept.begin(), kept.begin() + 4);
    finite_steps = static_cast<int64_t>(kept[4]);
    skipped = static_cast<int64_t>(kept[5]);
    if (kept.size() == 6 && finite_steps > 0) v[0] *= v[3] / static_cast<double>(finite_steps);  // the steps' mean, over items
    sums.slice(0, 0, 4).copy_(torch::tensor(v, torch::kDouble));
  }
};

}  // namespace rpe
