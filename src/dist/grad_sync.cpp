// Overlapped bucketed all-reduce (see grad_sync.h).
#include "dist/grad_sync.h"

#include <limits>
#include <stdexcept>

#include "util/torch_compat.h"

namespace rpe::dist {
namespace {
constexpr size_t kNoBucket = std::numeric_limits<size_t>::max();
}

GradSync::GradSync(const std::vector<torch::Tensor>& params, int64_t bucket_bytes, Collectives& c, int64_t world)
    : c_(c), world_(world) {
  for (auto it = params.rbegin(); it != params.rend(); ++it)
    if (it->requires_grad()) params_.push_back(*it);
  int64_t bytes = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const auto nbytes = static_cast<int64_t>(params_[i].nbytes());
    if (buckets_.empty() || params_[i].scalar_type() != params_[buckets_.back().members.back()].scalar_type() ||
        bytes + nbytes > bucket_bytes) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().members.push_back(i);
    bytes += nbytes;
    bucket_of_.push_back(buckets_.size() - 1);
    unhook_.push_back(compat::on_gradient_accumulated(params_[i], [this, i] { on_gradient(i); }));
  }
  touched_.assign(params_.size(), false);
}

GradSync::~GradSync() {
  for (auto& unhook : unhook_) unhook();
}

void GradSync::arm() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& b : buckets_) {
    // The first armed step launches nothing in backward (it counts the accumulations).
    b.pending = expected_.empty() ? 1 : 0;
    for (size_t i : b.members) b.pending += !expected_.empty() && expected_[i] > 0;  // unreached ones: not waited for
    b.work.reset();
  }
  fires_.assign(params_.size(), 0);
  next_ = 0;
  launched_in_backward_ = 0;
  armed_ = true;
  torch::NoGradGuard no_grad;
  launch_ready();  // buckets of unused parameters only
}

bool GradSync::finish() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!armed_) throw std::logic_error("GradSync::finish without arm");
  armed_ = false;
  torch::NoGradGuard no_grad;
  for (; next_ < buckets_.size(); ++next_) launch(next_);  // what backward did not reach
  const bool first = expected_.empty();
  bool refused = false;
  if (first) {
    expected_ = fires_;
    find_unused_everywhere();
  } else {
    for (size_t i = 0; i < params_.size() && !refused; ++i) {
      if (fires_[i] <= expected_[i]) continue;
      refused = true;  // not thrown here: the other ranks wait on these buckets, then on the caller's collective
      if (!refusal_)
        refusal_ = std::make_exception_ptr(std::runtime_error(
            "gradient sync: a parameter's gradient was accumulated " + std::to_string(fires_[i]) +
            " times in a backward, " + std::to_string(expected_[i]) +
            " in the first step (a graph that changes between steps is not supported)"));
    }
  }
  touched_.assign(params_.size(), false);  // the next step's micro-batches count anew
  reduced_elements_ = 0;
  for (auto& b : buckets_) {
    c_.wait("gradient all-reduce", b.work);
    reduced_elements_ += b.flat.numel();
    b.flat.div_(static_cast<double>(world_));
    int64_t offset = 0;
    for (size_t i : b.members) {
      auto& g = params_[i].mutable_grad();
      const int64_t n = g.numel();
      if (unused_everywhere_[i]) g.reset();  // as with one process: no gradient, so no update (first step)
      else g.copy_(b.flat.slice(0, offset, offset + n).view_as(g));
      offset += n;
    }
    b.flat = torch::Tensor();
    b.work.reset();
  }
  if (first) drop_unused_everywhere();
  return refused;
}

void GradSync::drop_unused_everywhere() {
  // Every rank holds the same unused_everywhere_ (one all-reduce), so the buckets stay aligned.
  for (auto& b : buckets_)
    std::erase_if(b.members, [&](size_t i) {
      if (unused_everywhere_[i]) bucket_of_[i] = kNoBucket;
      return unused_everywhere_[i];
    });
  std::vector<Bucket> kept;
  for (auto& b : buckets_)
    if (!b.members.empty()) kept.push_back(std::move(b));
  buckets_ = std::move(kept);
  for (size_t k = 0; k < buckets_.size(); ++k)
    for (size_t i : buckets_[k].members) bucket_of_[i] = k;
}

void GradSync::find_unused_everywhere() {
  // One all-reduce of the "reached" flags, once: the first step's only host read.
  std::vector<float> reached(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) reached[i] = touched_[i] ? 1.0F : 0.0F;
  auto flat = torch::tensor(reached).to(params_.empty() ? torch::Device(torch::kCPU) : params_[0].device());
  c_.all_reduce_sum(flat);
  const auto counts = flat.to(torch::kCPU);
  const float* count = counts.data_ptr<float>();
  unused_everywhere_.resize(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) unused_everywhere_[i] = count[i] == 0.0F;
}

void GradSync::on_gradient(size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  touched_[index] = true;
  if (!armed_) return;  // accumulation micro-steps: no communication
  // Final at its counted accumulation; the first step's count, and one past it (refused in
  // finish()), launch nothing.
  if (++fires_[index] != (expected_.empty() ? 0 : expected_[index])) return;
  --buckets_[bucket_of_[index]].pending;
  torch::NoGradGuard no_grad;
  launched_in_backward_ += launch_ready();
}

int64_t GradSync::launch_ready() {
  int64_t n = 0;
  for (; next_ < buckets_.size() && buckets_[next_].pending == 0; ++n) launch(next_++);
  return n;
}

void GradSync::launch(size_t k) {
  auto& b = buckets_[k];
  std::vector<torch::Tensor> views;
  for (size_t i : b.members) {
    auto& p = params_[i];
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);  // not reached: every rank's buckets line up
    views.push_back(p.grad().reshape({-1}));
  }
  b.flat = torch::cat(views);  // a copy: later writes to .grad cannot race the collective
  b.work = c_.all_reduce_async(b.flat);
}

}  // namespace rpe::dist
