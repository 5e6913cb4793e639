// The held-out MLM evaluation covers exactly the sequences it promises: eval_batches batches
// of one micro-batch of all ranks together, or the whole held-out set when that is smaller, even
// when the count is not a multiple of the evaluation's internal chunk of 8 sequences. And the MLM
// loss itself against the cross-entropy written out over every position of the batch.
#include <gtest/gtest.h>

#include <cstdlib>

#include "data/mlm_dataset.h"
#include "data/packing.h"
#include "data/wordpiece_tokenizer.h"
#include "data/data_test_util.h"
#include "dist/launch_ranks.h"
#include "test_models.h"
#include "train/mlm_task.h"

namespace rpe {
namespace {

// `rows` packed sequences of length 16 from a small synthetic corpus.
std::shared_ptr<PackedSequences> held_out(const Tokenizer& tok, int64_t rows) {
  auto seqs = std::make_shared<PackedSequences>(pack_documents(test::small_documents(30), tok, 16,
                                                               Packing::full_sentences));
  EXPECT_GE(seqs->size(), rows);
  seqs->tokens.resize(rows * 16);
  seqs->word_start.resize(rows * 16);
  return seqs;
}

// The reference: every wanted sequence in one batch (masks depend on (seed, epoch, index) only,
// and the permutation does not depend on the batch size), summed in double.
double one_batch_loss(BertModel& model, std::shared_ptr<const SequenceSource> data, const Tokenizer& tok,
                      const Config& cfg, int64_t wanted) {
  MlmLoader loader(data, tok, {MaskingOptions::from(cfg.data), wanted, static_cast<uint64_t>(cfg.train.seed) + 1,
                               /*shuffle=*/true});
  const MlmBatch b = loader.next();
  const auto sel = mlm_selection(b.labels);
  torch::NoGradGuard no_grad;
  const auto s = mlm_loss(model, b.ids, b.padding, sel.index, sel.targets);
  return s.loss.item<double>() / static_cast<double>(sel.index.size(0));
}

// A small model without dropout, evaluated over batches of 6 sequences.
Config eval_config(const Tokenizer& tok) {
  Config cfg;
  cfg.model = test::small_model_options("absolute", {.vocab = tok.vocab_size(), .dropout = 0.0});
  cfg.train.seed = 5;
  cfg.train.batch_size = 6;
  cfg.train.grad_accum = 1;
  return cfg;
}

TEST(MlmEvaluation, CoversEveryWantedSequenceWhenTheyAreNotAMultipleOfItsChunk) {
  WordPieceTokenizer tok(test::write_tiny_vocab(test::temp_dir()), true);
  Config cfg = eval_config(tok);
  torch::manual_seed(3);
  BertModel model(cfg.model);
  model->eval();
  // wanted = min(eval_batches x 6, 13): 12 (one full chunk + 4) and 13 (all, one chunk + 5).
  for (const int64_t eval_batches : {2, 3}) {
    cfg.train.eval_batches = eval_batches;
    auto data = held_out(tok, 13);
    const int64_t wanted = std::min<int64_t>(eval_batches * 6, 13);
    MlmTask task(model, data, data, tok, cfg, /*micro_batch=*/6, /*rank=*/0, /*world=*/1, torch::kCPU);
    torch::NoGradGuard no_grad;
    dist::DataParallel one_process;
    const double loss = task.score(task.eval_outputs(one_process))["loss"].get<double>();
    EXPECT_NEAR(loss, one_batch_loss(model, data, tok, cfg, wanted), 1e-5) << "eval_batches " << eval_batches;
    // and not the first 8 only (what a whole-chunks-only evaluation would give)
    EXPECT_GT(std::abs(loss - one_batch_loss(model, data, tok, cfg, 8)), 1e-4) << "eval_batches " << eval_batches;
  }
}

// One rank of MlmEvaluation.TwoRanksScoreWhatOneProcessScores: the chunks split over the ranks
// give one process's held-out loss and accuracy (the same sequences and masks).
TEST(MlmEvalWorker, DISABLED_TwoRanksScoreWhatOneProcessScores) {
  if (!std::getenv("RPE_DIST_WORKER")) GTEST_SKIP() << "a rank of MlmEvaluation.*, launched by it";
  const auto env = dist::detect_launch_env();
  dist::DataParallel dp(env, torch::kCPU, 60.0, 25.0);
  WordPieceTokenizer tok(test::write_tiny_vocab(test::temp_dir()), true);
  Config cfg = eval_config(tok);
  cfg.train.eval_batches = 4;  // 24 sequences: chunks of 8, 8, 8 (rank 0 scores two, rank 1 one)
  torch::manual_seed(3);  // the same weights on both ranks
  BertModel model(cfg.model);
  model->eval();
  auto data = held_out(tok, 24);
  MlmTask task(model, data, data, tok, cfg, /*micro_batch=*/3, env.rank, env.world, torch::kCPU);
  torch::NoGradGuard no_grad;
  dist::DataParallel one_process;
  const auto split = task.score(task.eval_outputs(dp)), alone = task.score(task.eval_outputs(one_process));
  EXPECT_NEAR(split["loss"].get<double>(), alone["loss"].get<double>(), 1e-12);
  EXPECT_EQ(split["mlm_accuracy"].get<double>(), alone["mlm_accuracy"].get<double>());
  EXPECT_NEAR(split["loss"].get<double>(), one_batch_loss(model, data, tok, cfg, 24), 1e-5);
}

TEST(MlmEvaluation, TwoRanksScoreWhatOneProcessScores) {
  test::run_two_ranks("MlmEvalWorker.DISABLED_TwoRanksScoreWhatOneProcessScores", "mlm_eval_ranks");
}

// mlm_loss gathers the masked rows before the head; the reference runs the head on every
// position and sums -log softmax(logits)[label] over those with a label, in fp64, with the
// log-sum-exp written out. Loss, hits and a gradient agree; pad_selection's rows add nothing;
// a batch with nothing masked has loss 0.
TEST(MlmLoss, EqualsTheCrossEntropyOverEveryLabelledPosition) {
  torch::manual_seed(8);
  BertModel model(test::small_model_options("m4", {.vocab = 50, .dropout = 0.0}));
  const int64_t B = 3, L = 10, V = 50;
  auto ids = torch::randint(5, V, {B, L}, torch::kLong);
  auto padding = torch::zeros({B, L}, torch::kBool);
  padding[2].narrow(0, 7, 3).fill_(true);
  auto labels = torch::full({B, L}, kIgnoreLabel, torch::kLong);
  for (const auto& [b, i] : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {0, 8}, {1, 0}, {1, 5}, {2, 3}, {2, 6}})
    labels[b][i] = (b * 7 + i * 3) % V;
  const auto sel = mlm_selection(labels);
  ASSERT_EQ(sel.index.size(0), 6);

  const auto ours = mlm_loss(model, ids, padding, sel.index, sel.targets);
  ours.loss.backward();
  const auto our_grad = model->word_embeddings->weight.grad().clone();
  model->zero_grad();

  auto logits = model->mlm_logits(model->encode(ids, padding).reshape({B * L, -1})).to(torch::kDouble);  // [B*L, V]
  auto flat = labels.reshape({-1});
  torch::Tensor loss = torch::zeros({}, torch::kDouble);
  int64_t hits = 0;
  for (int64_t r = 0; r < B * L; ++r) {
    const int64_t y = flat[r].item<int64_t>();
    if (y == kIgnoreLabel) continue;
    const auto row = logits[r];
    const auto top = row.max();
    loss = loss + (top + (row - top).exp().sum().log()) - row[y];
    hits += row.argmax().item<int64_t>() == y;
  }
  loss.backward();
  const auto ref_grad = model->word_embeddings->weight.grad();
  EXPECT_NEAR(ours.loss.item<double>(), loss.item<double>(), 1e-5 * loss.item<double>());
  EXPECT_EQ(ours.correct.item<int64_t>(), hits);
  EXPECT_LT((our_grad - ref_grad).abs().max().item<double>(), 1e-5 * ref_grad.abs().max().item<double>());

  torch::NoGradGuard no_grad;
  const auto padded = mlm_loss(model, ids, padding, pad_selection(sel, 9).index, pad_selection(sel, 9).targets);
  EXPECT_NEAR(padded.loss.item<double>(), ours.loss.item<double>(), 1e-6 * loss.item<double>());
  EXPECT_EQ(padded.correct.item<int64_t>(), hits);
  const auto none = mlm_selection(torch::full({B, L}, kIgnoreLabel, torch::kLong));
  EXPECT_EQ(mlm_loss(model, ids, padding, none.index, none.targets).loss.item<double>(), 0.0);
}

}  // namespace
}  // namespace rpe
