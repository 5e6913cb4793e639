// No host synchronisation in a training step (issue 14): the ops that make the host wait for
// the device (item(), nonzero, blocking copies to the host, ...; tests/host_sync.h) are
// counted while every method trains (forward and backward, fp32 and bf16, fused and plain,
// with and without padding), while the fine-tuning heads train, and over whole engine runs,
// where the only reads allowed are those of the log line (a run of 6 steps reads what a run of
// 3 does, with AdamW and with LAMB). On the CPU they are found by name; the same tests run on
// CUDA when there is one (scripts/gpu_check.sh runs HostSync.*).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <memory>

#include "../dist/launch_ranks.h"
#include "dist/data_parallel.h"
#include "finetune/heads.h"
#include "host_sync.h"
#include "model/attention/registry.h"
#include "model/bert.h"
#include "test_models.h"
#include "tiny_run.h"
#include "train/engine.h"
#include "train/mlm_task.h"
#include "train/optim.h"
#include "train/precision.h"

namespace rpe::test {
namespace {

constexpr int64_t kB = 2, kL = 16, kVocab = 50;

// A host MLM batch: random ids, 4 selected positions per row; `padded`: row 1 ends in 5 pads.
MicroBatch mlm_batch(bool padded, int64_t seed) {
  HostSyncWatch::Pause host_side;  // the loader's work, on host tensors
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto ids = torch::randint(5, kVocab, {kB, kL}, gen, torch::kLong);
  auto labels = torch::full({kB, kL}, static_cast<int64_t>(kIgnoreLabel), torch::kLong);
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t i : {1, 4, 7, 9}) labels[b][i] = ids[b][i];
  torch::Tensor padding;
  if (padded) {
    padding = torch::zeros({kB, kL}, torch::kBool);
    padding[1].slice(0, kL - 5).fill_(true);
  }
  const auto sel = mlm_selection(labels);
  return {{ids, padding, sel.index, sel.targets}, {}};
}

MicroBatch to(const MicroBatch& b, const torch::Device& d) {
  MicroBatch out = b;
  for (auto& t : out.tensors)
    if (t.defined()) t = t.to(d);
  return out;
}

ModelOptions options(const std::string& method) {
  return small_model_options(method, {.vocab = kVocab, .max_position = kL, .dropout = 0.1});  // dropout: training
}

// Each line's own count: at least one for what waits (CUDA may record one wait as more than
// one op), none for what does not.
TEST(HostSync, TheWatchSeesReadsOfTheDeviceAlone) {
  for (const auto& device : devices_to_test()) {
    SCOPED_TRACE(device.str());
    auto x = torch::arange(6, torch::TensorOptions(torch::kFloat).device(device));
    HostSyncWatch watch(device);
    auto seen = [&, before = size_t{0}](const std::function<void()>& run) mutable {
      run();
      const size_t n = watch.count() - before;
      before = watch.count();
      return n;
    };
    EXPECT_GE(seen([&] { (void)x.sum().item<float>(); }), 1u) << "a read";
    EXPECT_GE(seen([&] { (void)x.gt(2).nonzero(); }), 1u) << "a count";
    EXPECT_GE(seen([&] { (void)x.index({x.gt(2)}); }), 1u) << "a boolean index (nonzero inside)";
    EXPECT_EQ(seen([&] {
                HostSyncWatch::Pause host_side;
                (void)x.sum().item<float>();
              }),
              0u)
        << "paused";
    EXPECT_EQ(seen([&] { (void)x.mul(2).index_select(0, torch::arange(3, x.options().dtype(torch::kLong))); }), 0u)
        << "no read: " << watch.list();
    if (device.is_cuda()) {
      EXPECT_EQ(seen([&] { (void)torch::ones({2}).sum().item<float>(); }), 0u) << "a host tensor";
      EXPECT_GE(seen([&] { (void)x.cpu(); }), 1u) << "a blocking copy back";
      EXPECT_GE(seen([&] { (void)torch::ones({2}).to(device); }), 1u) << "a blocking copy there (pageable)";
      EXPECT_EQ(seen([&] { (void)torch::ones({2}).pin_memory().to(device, /*non_blocking=*/true); }), 0u)
          << "a pinned, non-blocking copy: " << watch.list();
    }
  }
}

TEST(HostSync, EveryMethodTrainsWithoutReadingTheDevice) {
  for (const auto& device : devices_to_test()) {
    for (const auto& name : attention_method_names())
      for (bool fused : {true, false})
        for (auto dtype : {at::kFloat, at::kBFloat16, at::kHalf})  // fp32, bf16, fp16
          for (bool padded : {false, true}) {
            torch::manual_seed(0);
            BertModel model(options(name));
            model->to(device);
            model->train();
            model->set_fused_attention(fused);
            const auto b = to(mlm_batch(padded, 1), device);
            const auto& t = b.tensors;
            HostSyncWatch watch(device);
            MlmSums s;
            {
              AutocastGuard autocast(device, dtype);
              s = mlm_loss(model, t[0], t[1], t[2], t[3]);
            }
            s.loss.backward();
            EXPECT_EQ(watch.count(), 0u) << name << " on " << device << (fused ? " fused" : " plain")
                                         << " " << c10::toString(dtype) << (padded ? " padded" : "")
                                         << ": " << watch.list();
          }
  }
}

// Recomputation saves and sets generator states and runs a backward inside the backward: none of
// it reads the device.
TEST(HostSync, RecomputedPiecesTrainWithoutReadingTheDevice) {
  for (const auto& device : devices_to_test())
    for (const auto& name : attention_method_names())
      for (const auto what : {Recompute::attention, Recompute::layers}) {
        torch::manual_seed(0);
        BertModel model(options(name));
        model->to(device);
        model->train();
        model->set_fused_attention(device.is_cuda());
        model->set_activation_checkpointing(what);
        const auto b = to(mlm_batch(true, 1), device);
        const auto& t = b.tensors;
        HostSyncWatch watch(device);
        MlmSums s;
        {
          AutocastGuard autocast(device, at::kBFloat16);
          s = mlm_loss(model, t[0], t[1], t[2], t[3]);
        }
        s.loss.backward();
        EXPECT_EQ(watch.count(), 0u) << name << " on " << device << (what == Recompute::layers ? " layers" : " attention")
                                     << ": " << watch.list();
      }
}

TEST(HostSync, FineTuningHeadsTrainWithoutReadingTheDevice) {
  std::vector<int64_t> a{2, 11, 12, 3, 13, 14, 15, 3}, shorter{2, 16, 3, 17, 3};
  for (const auto& device : devices_to_test())
    for (const std::string name : {"absolute", "m4", "t5_bias"}) {
      SCOPED_TRACE(name + " on " + device.str());
      torch::manual_seed(0);
      finetune::QaModel qa(options(name));
      finetune::ClassifierModel cls(options(name), 3);
      qa->to(device);
      cls->to(device);
      const auto batch = finetune::make_batch({&a, &shorter}, 0, device, 3);  // padded, with token types
      const auto start = torch::tensor({4, 3}).to(device), end = torch::tensor({5, 3}).to(device);
      const auto label = torch::tensor({0, 2}).to(device);
      HostSyncWatch watch(device);
      for (auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
        torch::Tensor loss;
        {
          AutocastGuard autocast(device, dtype);
          loss = finetune::qa_loss(qa->forward(batch), start, end) +
                 torch::nn::functional::cross_entropy(cls->forward(batch), label);
        }
        loss.backward();
        (void)finetune::real_tokens(batch.ids, batch.padding);
      }
      EXPECT_EQ(watch.count(), 0u) << watch.list();
    }
}

// An MLM task over random batches of a small m4 model; batches are built on the host (not
// watched), as the loader does, and copied by the engine.
class MlmToyTask : public Task {
 public:
  explicit MlmToyTask(BertModel model) : model_(std::move(model)) {}
  MicroBatch next_batch() override {
    auto b = mlm_batch(/*padded=*/next_ % 2 == 1, next_);
    ++next_;
    b.cursor = {0, next_};
    return b;
  }
  torch::Tensor count(const MicroBatch& b) override {
    const auto& index = b.tensors[2];
    return torch::full({}, static_cast<double>(index.size(0)), torch::TensorOptions(torch::kDouble).device(index.device()));
  }
  BatchSums forward(const MicroBatch& b) override {
    const auto& t = b.tensors;
    const MlmSums s = mlm_loss(model_, t[0], t[1], t[2], t[3]);
    return {s.loss, s.correct, torch::full({}, static_cast<double>(t[0].numel()), s.loss.options().dtype(torch::kDouble))};
  }
  std::string accuracy_name() const override { return "mlm_accuracy"; }

 private:
  BertModel model_;
  int64_t next_ = 0;
};

// Host-synchronising ops of a whole Engine::run of `steps` optimizer steps (2 micro-batches
// each, clipping on, `precision`: bf16, or fp16 with its loss scaling), logging once at its end;
// their list goes to `list`. `group`: in a process group of one (NCCL on CUDA, Gloo on the CPU),
// whose gradient all-reduce is overlapped with the backward by hooks on the autograd threads.
size_t syncs_of_a_run(const torch::Device& device, const std::string& optimizer, const std::string& precision,
                      int64_t steps, std::string* list = nullptr, bool group = false) {
  torch::manual_seed(0);
  BertModel model(options("m4"));
  model->to(device);
  TrainOptions t;
  t.optimizer = optimizer;
  t.batch_size = 2 * kB;
  t.grad_accum = 2;
  t.max_steps = steps;
  t.warmup_steps = 2;
  t.lr = 1e-3;
  t.clip_norm = 1.0;
  t.log_every = 1000;
  t.eval_every = 0;
  t.save_every = 0;
  t.precision = precision;
  auto opt = make_optimizer(*model, t);
  MlmToyTask task(model);
  dist::LaunchEnv env;
  env.group_of_one = group;
  env.master_port = free_port();
  auto dp = group ? std::make_unique<dist::DataParallel>(env, device, 60.0, 0.05)  // several buckets
                  : std::make_unique<dist::DataParallel>();
  EngineSetup s;
  s.train = t;
  s.device = device;
  s.dp = dp.get();
  Engine engine(std::move(s), *model, *opt, task);
  HostSyncWatch watch(device);
  const auto result = engine.run(TrainState{});
  EXPECT_EQ(result.state.step, steps);
  EXPECT_TRUE(std::isfinite(result.final_loss));
  if (list) *list = watch.list();
  return watch.count();
}

// AdamW (the presets' optimizer) and LAMB (both DeviceSkippableStep), in bf16 and in fp16 (the
// loss scale is unscaled, tested and updated on the device): nothing read per step; the end of
// a run reads the token count twice (the last window, the run's total) and, on CUDA only (a
// copy to the host waits there, on the CPU it is no wait), copies the log line's sums (fp16:
// with the scale) and the window for the checkpoint (LogWindow::snapshot).
TEST(HostSync, EngineStepsReadTheDeviceOnlyToLog) {
  for (const auto& device : devices_to_test())
    for (const std::string optimizer : {"adamw", "lamb"})
      for (const std::string precision : {"bf16", "fp16"}) {
        SCOPED_TRACE(optimizer + " " + precision + " on " + device.str());
        std::string list;
        const size_t three = syncs_of_a_run(device, optimizer, precision, 3, &list),
                     six = syncs_of_a_run(device, optimizer, precision, 6);
        EXPECT_EQ(six, three) << "reads that grow with the steps; 3 steps read " << list;
        EXPECT_LE(three, device.is_cpu() ? 2u : 4u) << "more reads than the end of a run needs: " << list;
      }
}

// In a process group (here of one: NCCL on CUDA, the path of every multi-GPU run) the step's
// gradient all-reduce, its statistics' all-reduce and the buckets' waits read nothing either:
// the same count for 3 steps as for 6, and once a run what one process does not do: the first
// step's all-reduce of which parameters any rank reached (its flags copied to the device and
// back: two waits on CUDA, none on the CPU), the replica check at the run's end (its norms
// copied back: one), and the agreement that the closing log line was written (dp.gather's sum:
// to the device and back, two on CUDA) -- 5 on CUDA, 1 on the CPU (the replica check's item).
TEST(HostSync, AProcessGroupAddsNoReadsOfTheDevice) {
  for (const auto& device : devices_to_test()) {
    SCOPED_TRACE(device.str());
    std::string list;
    const size_t alone = syncs_of_a_run(device, "adamw", "bf16", 3),
                 three = syncs_of_a_run(device, "adamw", "bf16", 3, &list, /*group=*/true),
                 six = syncs_of_a_run(device, "adamw", "bf16", 6, nullptr, /*group=*/true);
    EXPECT_EQ(six, three) << "reads that grow with the steps; 3 steps read " << list;
    EXPECT_LE(three, alone + (device.is_cuda() ? 5u : 1u)) << "reads one process does not make: " << list;
  }
}

}  // namespace
}  // namespace rpe::test
