// train.cuda_graphs: the MLM selection padded to its fixed capacity gives the loss and count of
// the exact one; the engine's static-buffer path (graph body run directly, as on a CPU) trains
// exactly as the plain step, gradient accumulation included; where the path cannot apply the
// engine refuses with the key's name; and on CUDA (scripts/gpu_check.sh runs it) the captured
// and replayed graphs train as the eager step does.
#include <gtest/gtest.h>

#include "data/mlm_dataset.h"
#include "data/packing.h"
#include "data/wordpiece_tokenizer.h"
#include "data/data_test_util.h"
#include "test_models.h"
#include "toy_engine.h"
#include "train/cuda_graph.h"
#include "train/engine.h"
#include "train/mlm_task.h"
#include "train/optim.h"

namespace rpe {
namespace {

// Packed sequences of length 16; `Packing::full_sentences` leaves some padded, `contiguous` none.
std::shared_ptr<PackedSequences> sequences(const Tokenizer& tok, Packing packing) {
  return std::make_shared<PackedSequences>(pack_documents(test::small_documents(40), tok, 16, packing));
}

struct MlmRun {
  Config cfg;
  BertModel model{nullptr};
  dist::DataParallel dp;
  std::unique_ptr<torch::optim::Optimizer> opt;
  std::unique_ptr<MlmTask> task;
  std::vector<double> losses;  // per step (EngineHooks::on_step)

  // Trains `steps` steps of batch 8 in `accum` micro-batches on `device`; `graphs`: through
  // train.cuda_graphs (emulated off CUDA), `fixed`: the padded selection alone.
  MlmRun(const Tokenizer& tok, std::shared_ptr<const SequenceSource> data, const torch::Device& device, bool graphs,
         bool fixed, int64_t steps, int64_t accum, double dropout) {
    cfg.model = test::small_model_options("absolute", {.vocab = tok.vocab_size(), .dropout = dropout});
    cfg.train.batch_size = 8;
    cfg.train.grad_accum = accum;
    cfg.train.max_steps = steps;
    cfg.train.warmup_steps = 0;
    cfg.train.lr = 1e-3;
    cfg.train.log_every = 1;
    cfg.train.eval_every = 0;
    cfg.train.cuda_graphs = graphs && device.is_cuda();
    torch::manual_seed(11);
    model = BertModel(cfg.model);
    model->to(device);
    model->set_fused_attention(device.is_cuda());  // as pretraining runs it: SDPA under capture
    opt = make_optimizer(*model, cfg.train);
    task = std::make_unique<MlmTask>(model, data, nullptr, tok, cfg, 8 / accum, 0, 1, device);
    task->set_fixed_shapes(graphs || fixed);
    EngineSetup s;
    s.train = cfg.train;
    s.device = device;
    s.dp = &dp;
    s.emulate_cuda_graphs = graphs && !device.is_cuda();
    s.hooks.on_step = [this](int64_t, double loss) { losses.push_back(loss); };
    Engine engine(std::move(s), *model, *opt, *task);
    engine.run(TrainState{});
  }
};

TEST(CudaGraphs, ThePaddedSelectionGivesTheExactLossAndCount) {
  WordPieceTokenizer tok(test::write_tiny_vocab(test::temp_dir()), true);
  auto data = sequences(tok, Packing::full_sentences);
  MlmLoader loader(data, tok, {MaskingOptions{}, 6, 3, /*shuffle=*/true});
  torch::manual_seed(2);
  BertModel model(test::small_model_options("absolute", {.vocab = tok.vocab_size(), .dropout = 0.0}));
  torch::NoGradGuard no_grad;
  for (int i = 0; i < 4; ++i) {
    const MlmBatch b = loader.next();
    const auto sel = mlm_selection(b.labels);
    const int64_t capacity = 6 * std::max<int64_t>(1, std::llround(16 * 0.15));  // 6 x 2
    ASSERT_LE(sel.index.size(0), capacity);
    const auto padded = pad_selection(sel, capacity);
    ASSERT_EQ(padded.index.size(0), capacity);
    const auto exact = mlm_loss(model, b.ids, b.padding, sel.index, sel.targets);
    const auto fixed = mlm_loss(model, b.ids, b.padding, padded.index, padded.targets);
    EXPECT_NEAR(fixed.loss.item<double>(), exact.loss.item<double>(), 1e-4 * std::abs(exact.loss.item<double>()));
    EXPECT_EQ(fixed.correct.item<int64_t>(), exact.correct.item<int64_t>());
    EXPECT_THROW(pad_selection(sel, sel.index.size(0) - 1), std::logic_error);
  }
}

TEST(CudaGraphs, FixedShapesPadEveryBatchAndCountOnlyTheSelected) {
  WordPieceTokenizer tok(test::write_tiny_vocab(test::temp_dir()), true);
  Config cfg;
  cfg.model = test::small_model_options("absolute", {.vocab = tok.vocab_size()});
  BertModel model(cfg.model);
  MlmTask task(model, sequences(tok, Packing::full_sentences), nullptr, tok, cfg, 4, 0, 1, torch::kCPU);
  task.set_fixed_shapes(true);
  for (int i = 0; i < 5; ++i) {
    const MicroBatch b = task.next_batch();
    EXPECT_EQ(b.tensors[2].size(0), 4 * 2);  // 4 sequences x max(1, round(16 x 0.15))
    EXPECT_EQ(task.count(b).item<double>(), b.tensors[3].ne(kIgnoreLabel).sum().item<double>());
  }
}

// The static-buffer path (what a graph replays) against the plain step: the same losses step by
// step and the same weights, with dropout and two micro-batches a step.
TEST(CudaGraphs, TheGraphPathTrainsAsThePlainStep) {
  WordPieceTokenizer tok(test::write_tiny_vocab(test::temp_dir()), true);
  for (const auto packing : {Packing::full_sentences, Packing::contiguous}) {
    auto data = sequences(tok, packing);
    MlmRun plain(tok, data, torch::kCPU, false, false, 5, 2, 0.1);
    MlmRun graphs(tok, data, torch::kCPU, true, false, 5, 2, 0.1);
    ASSERT_EQ(plain.losses.size(), 5u);
    ASSERT_EQ(graphs.losses.size(), 5u);
    for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(graphs.losses[i], plain.losses[i], 1e-5) << "step " << i;
    auto p = graphs.model->named_parameters();
    for (const auto& q : plain.model->named_parameters())
      EXPECT_TRUE(torch::allclose(p[q.key()], q.value(), 1e-5, 1e-6)) << q.key();
  }
}

TEST(CudaGraphs, WhereTheyCannotApplyTheEngineSaysWhy) {
  test::Toy toy;  // a task of changing shapes (fine-tuning's case): refused
  auto t = test::toy_options(2, 1);
  t.cuda_graphs = true;
  EXPECT_NE(test::user_error([&] { test::ToyRun run(t); }).find("train.cuda_graphs: pretraining only"),
            std::string::npos);
  WordPieceTokenizer tok(test::write_tiny_vocab(test::temp_dir()), true);
  Config cfg;
  cfg.model = test::small_model_options("absolute", {.vocab = tok.vocab_size()});
  cfg.train.cuda_graphs = true;
  BertModel model(cfg.model);
  auto opt = make_optimizer(*model, cfg.train);
  MlmTask task(model, sequences(tok, Packing::contiguous), nullptr, tok, cfg, 4, 0, 1, torch::kCPU);
  task.set_fixed_shapes(true);
  dist::DataParallel dp;
  EngineSetup s;
  s.train = cfg.train;
  s.dp = &dp;
  EngineSetup fp16 = s;
  EXPECT_NE(test::user_error([&] { Engine(std::move(s), *model, *opt, task); })
                .find("train.cuda_graphs: needs a CUDA device, got cpu"),
            std::string::npos);
  fp16.train.precision = "fp16";  // its loss scale: not in the graph
  fp16.emulate_cuda_graphs = true;
  EXPECT_NE(test::user_error([&] { Engine(std::move(fp16), *model, *opt, task); })
                .find("train.cuda_graphs: needs precision fp32 or bf16"),
            std::string::npos);
}

// On a GPU: captured and replayed (two micro-batches a step, padded and unpadded data, fused
// attention) against the eager step in fp32, without dropout (the two differ by rounding only)
// and with it (the graph draws the masks the eager step draws: the same generator offsets).
TEST(CudaGraphs, CapturedGraphsTrainAsTheEagerStepOnCuda) {
  if (!torch::cuda::is_available() || !CudaGraph::built()) GTEST_SKIP() << "no CUDA device";
  WordPieceTokenizer tok(test::write_tiny_vocab(test::temp_dir()), true);
  for (const double dropout : {0.0, 0.1})
    for (const auto packing : {Packing::full_sentences, Packing::contiguous}) {
      auto data = sequences(tok, packing);
      MlmRun eager(tok, data, torch::kCUDA, false, false, 6, 2, dropout);
      MlmRun graphs(tok, data, torch::kCUDA, true, false, 6, 2, dropout);
      ASSERT_EQ(graphs.losses.size(), 6u);
      for (size_t i = 0; i < 6; ++i)
        EXPECT_NEAR(graphs.losses[i], eager.losses[i], 1e-4 * std::abs(eager.losses[i]))
            << "step " << i << ", dropout " << dropout;
      auto p = graphs.model->named_parameters();
      for (const auto& q : eager.model->named_parameters())
        EXPECT_TRUE(torch::allclose(p[q.key()], q.value(), 1e-4, 1e-5)) << q.key() << ", dropout " << dropout;
    }
}

}  // namespace
}  // namespace rpe
