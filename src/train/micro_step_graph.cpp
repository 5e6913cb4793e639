// Micro-batch forward/backward as replayed CUDA graphs (see micro_step_graph.h).
#include "train/micro_step_graph.h"

#include "train/checkpoint.h"
#include "train/gradients.h"
#include "train/precision.h"
#include "util/errors.h"
#include "util/log.h"

namespace rpe {

namespace {
// The shapes of a batch's tensors ("u" for an undefined one): one graph per distinct key.
std::string shapes_key(const MicroBatch& b) {
  std::string key;
  for (const auto& t : b.tensors) key += t.defined() ? c10::str(t.sizes(), t.scalar_type()) : std::string("u");
  return key;
}
}  // namespace

MicroStepGraphs::MicroStepGraphs(Task& task, std::vector<torch::Tensor> params, const torch::Device& device,
                                 at::ScalarType autocast_type, int64_t world, bool emulate)
    : task_(task),
      params_(std::move(params)),
      device_(device),
      autocast_type_(autocast_type),
      world_(world),
      emulate_(emulate) {}

void MicroStepGraphs::zero_grad() {
  torch::NoGradGuard no_grad;
  const auto grads = defined_grads(params_);
  if (!grads.empty()) at::_foreach_zero_(grads);  // a few launches, not one per tensor (~200)
}

void MicroStepGraphs::body(Graph& g) {
  BatchSums s;
  {
    AutocastGuard autocast(device_, autocast_type_);
    s = task_.forward(g.inputs);
  }
  auto loss = s.loss * g.scale.to(s.loss.scalar_type());
  loss.backward();  // accumulates into the gradients in place (they exist: see graph_for)
  torch::NoGradGuard no_grad;
  const auto correct = s.correct.defined() ? s.correct.to(torch::kDouble) : torch::zeros({}, g.sums.options());
  g.sums.copy_(torch::stack({loss.detach().to(torch::kDouble) / static_cast<double>(world_), correct,
                             s.tokens.to(torch::kDouble)}));
}

MicroStepGraphs::Graph& MicroStepGraphs::graph_for(const MicroBatch& batch) {
  const std::string key = shapes_key(batch);
  if (auto it = graphs_.find(key); it != graphs_.end()) return it->second;
  const CudaGraph* pool = nullptr;  // graphs replay one after the other: one memory pool for all
  for (const auto& [k, other] : graphs_) pool = pool ? pool : other.graph.get();
  Graph& g = graphs_[key];
  const auto dopt = torch::TensorOptions(torch::kDouble).device(device_);
  for (const auto& t : batch.tensors) g.inputs.tensors.push_back(t.defined() ? t.clone() : torch::Tensor());
  g.scale = torch::ones({}, dopt);
  g.sums = torch::zeros({3}, dopt);
  if (emulate_) return g;

  // The warm-ups and the capture must leave the step as they found it: this micro-batch may not
  // be the step's first (its gradients so far are kept aside) and the random streams are rewound.
  std::vector<torch::Tensor> kept;
  {
    torch::NoGradGuard no_grad;
    for (const auto& p : params_) kept.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  }
  const RandomStates rng = RandomStates::capture(device_);
  log::info("train", "cuda_graphs: capturing graph {} (a micro-batch's forward and backward)", graphs_.size());
  try {
    g.graph = std::make_unique<CudaGraph>(
        device_, [&] { body(g); }, /*warmup=*/2, [&] { zero_grad(); }, [&] { body(g); }, [] {}, pool);
  } catch (const std::exception& e) {
    graphs_.erase(key);
    // One line: c10::Error's what() carries a backtrace.
    const auto* c10 = dynamic_cast<const c10::Error*>(&e);
    std::string why = c10 ? c10->what_without_backtrace() : e.what();
    if (const auto nl = why.find('\n'); nl != std::string::npos) why.resize(nl);
    throw UserError("train.cuda_graphs: capturing a micro-batch failed (" + why +
                    "); set train.cuda_graphs=false to train without graphs");
  }
  rng.restore();
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {  // the warm-ups created every gradient: zero, or as kept
    auto grad = params_[i].mutable_grad();
    if (kept[i].defined()) grad.copy_(kept[i]);
    else if (grad.defined()) grad.zero_();
  }
  return g;
}

torch::Tensor MicroStepGraphs::run(const MicroBatch& batch, const torch::Tensor& scale) {
  Graph& g = graph_for(batch);
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < batch.tensors.size(); ++i)
      if (batch.tensors[i].defined()) g.inputs.tensors[i].copy_(batch.tensors[i], /*non_blocking=*/true);
    g.scale.copy_(scale, /*non_blocking=*/true);
  }
  if (g.graph) g.graph->replay();
  else body(g);
  return g.sums;  // read (added) before the next run: the stream orders it before the next replay
}

}  // namespace rpe
