// Task heads and the fine-tuning config: the QA loss against its formula (padding left out),
// batch lengths rounded up to a multiple, lengths beyond pretraining (relative works, absolute
// refuses), resolving a config on a checkpoint, and the kept model's folder (replaced whole).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "finetune/finetune.h"
#include "finetune/heads.h"
#include "finetune/saved_model.h"
#include "finetune/seed_run.h"
#include "train/checkpoint.h"
#include "util/errors.h"
#include "test_models.h"
#include "test_paths.h"

using namespace rpe;
using namespace rpe::finetune;
namespace fs = std::filesystem;

namespace {
ModelOptions tiny(const std::string& method, int64_t max_position) {
  return test::small_model_options(method, {.layers = 1, .max_position = max_position, .dropout = 0.0});
}
}  // namespace

TEST(QaHead, LossIsMeanOfStartAndEndCrossEntropy) {
  torch::manual_seed(0);
  auto logits = torch::randn({3, 5, 2});
  auto start = torch::tensor({0, 2, 4}), end = torch::tensor({1, 2, 3});
  double want = 0;
  for (int b = 0; b < 3; ++b)
    for (int side = 0; side < 2; ++side) {
      auto row = logits[b].select(-1, side);  // [5]
      const int64_t target = (side == 0 ? start : end)[b].item<int64_t>();
      // -log softmax(row)[target], written out.
      want += (-row[target] + row.exp().sum().log()).item<double>() / 6.0;
    }
  EXPECT_NEAR(qa_loss(logits, start, end).item<double>(), want, 1e-5);
}

// Padding takes no part in either softmax: the loss is the formula over each window's own
// positions, whatever its batch's length.
TEST(QaHead, PaddingTakesNoPartInTheLoss) {
  torch::manual_seed(0);
  auto logits = torch::randn({2, 6, 2});
  const int64_t len[2] = {6, 4};
  auto padding = torch::zeros({2, 6}, torch::kBool);
  padding[1].narrow(0, 4, 2).fill_(true);
  auto start = torch::tensor({5, 1}), end = torch::tensor({0, 3});
  double want = 0;
  for (int b = 0; b < 2; ++b)
    for (int side = 0; side < 2; ++side) {
      auto row = logits[b].select(-1, side).narrow(0, 0, len[b]);  // the window's own positions
      const int64_t target = (side == 0 ? start : end)[b].item<int64_t>();
      want += (-row[target] + row.exp().sum().log()).item<double>() / 4.0;
    }
  EXPECT_NEAR(qa_loss(logits, start, end, padding).item<double>(), want, 1e-5);
  // Without the mask the padding's logits would count (BERT's loss on fixed-length windows).
  EXPECT_GT(std::abs(qa_loss(logits, start, end).item<double>() - want), 1e-3);
  // Gradients stay finite and leave the padding alone.
  auto x = logits.clone().requires_grad_(true);
  qa_loss(x, start, end, padding).backward();
  EXPECT_TRUE(torch::isfinite(x.grad()).all().item<bool>());
  EXPECT_EQ(x.grad()[1].narrow(0, 4, 2).abs().max().item<float>(), 0.0f);
}

// Lengths round up to finetune.pad_to_multiple, never past max_len (unless the longest
// sequence is longer); a batch already at a multiple carries no mask.
TEST(QaHead, BatchesPadToAMultipleUpToMaxLen) {
  std::vector<int64_t> s13(13, 7), s9(9, 7), s16(16, 7), s20(20, 7);
  auto length = [](const Batch& b) { return b.ids.size(1); };
  EXPECT_EQ(length(make_batch({&s13, &s9}, 0, torch::kCPU, 3, 8, 384)), 16);
  EXPECT_EQ(length(make_batch({&s13, &s9}, 0, torch::kCPU, 3, 1, 384)), 13);
  EXPECT_EQ(length(make_batch({&s13}, 0, torch::kCPU, 3, 8, 14)), 14);
  EXPECT_EQ(length(make_batch({&s20}, 0, torch::kCPU, 3, 8, 14)), 20);
  auto b = make_batch({&s13, &s9}, 0, torch::kCPU, 3, 8, 384);
  EXPECT_EQ(real_tokens(b.ids, b.padding).item<int64_t>(), 22);
  EXPECT_TRUE(b.padding[0].narrow(0, 13, 3).all().item<bool>());
  EXPECT_FALSE(b.padding[0].narrow(0, 0, 13).any().item<bool>());
  EXPECT_FALSE(make_batch({&s16, &s16}, 0, torch::kCPU, 3, 8, 384).padding.defined());
}

// Rounding the length up changes no loss: the extra keys are masked out of attention and the
// extra positions out of the QA softmax (a relative and an absolute method).
TEST(QaHead, RoundingTheBatchLengthUpChangesNoLoss) {
  for (const std::string method : {"m4", "absolute"}) {
    torch::manual_seed(0);
    QaModel m(tiny(method, 32));
    m->eval();
    std::vector<int64_t> a{2, 11, 12, 3, 13, 14, 15, 16, 17, 3}, b{2, 18, 3, 19, 20, 3};
    auto start = torch::tensor({5, 4}), end = torch::tensor({7, 4});
    torch::NoGradGuard no_grad;
    auto loss = [&](int64_t multiple) {
      const auto batch = make_batch({&a, &b}, 0, torch::kCPU, 3, multiple, 32);
      return qa_loss(m->forward(batch), start, end, batch.padding).item<double>();
    };
    EXPECT_NEAR(loss(8), loss(1), 1e-5) << method;  // lengths 16 and 10
  }
}

TEST(QaHead, RelativeMethodRunsBeyondPretrainingLengthAbsoluteRefuses) {
  torch::manual_seed(0);
  QaModel m4(tiny("m4", 16));
  std::vector<int64_t> ids(40, 7);
  const auto out = m4->forward(make_batch({&ids}, 0, torch::kCPU));
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{1, 40, 2}));
  EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
  QaModel abs(tiny("absolute", 16));
  EXPECT_THROW(abs->forward(make_batch({&ids}, 0, torch::kCPU)), UserError);
}

TEST(QaHead, BatchTokenTypesFollowTheFirstSep) {
  // [CLS]=2 q q [SEP]=3 c c [SEP]=3, and a single sentence [CLS] a [SEP], padded with 0.
  std::vector<int64_t> pair{2, 11, 12, 3, 13, 14, 3}, single{2, 15, 3};
  auto batch = make_batch({&pair, &single}, 0, torch::kCPU, 3);
  auto want = torch::tensor({0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 1}, torch::kLong).view({2, 7});
  EXPECT_TRUE(torch::equal(batch.types, want)) << batch.types;
  EXPECT_TRUE(torch::equal(batch.padding[1], torch::tensor({0, 0, 0, 1, 1, 1, 1}).to(torch::kBool)));
  EXPECT_FALSE(make_batch({&pair}, 0, torch::kCPU).types.defined());  // sep_id < 0: no types
}

// A batch of equal lengths carries no padding mask (so SDPA may use its flash kernel) and
// gives the logits an explicit all-false mask gives; a shorter sequence brings the mask back.
TEST(QaHead, BatchWithoutPaddingCarriesNoMask) {
  torch::manual_seed(0);
  QaModel m4(tiny("m4", 16));
  m4->eval();
  std::vector<int64_t> a{2, 11, 12, 3}, b{2, 13, 14, 3}, short_one{2, 15, 3};
  auto full = make_batch({&a, &b}, 0, torch::kCPU, 3);
  EXPECT_FALSE(full.padding.defined());
  auto explicit_mask = full;
  explicit_mask.padding = torch::zeros({2, 4}, torch::kBool);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(m4->forward(full), m4->forward(explicit_mask), 0, 1e-6));
  EXPECT_EQ(real_tokens(full.ids, full.padding).item<int64_t>(), 8);
  auto padded = make_batch({&a, &short_one}, 0, torch::kCPU, 3);
  ASSERT_TRUE(padded.padding.defined());
  EXPECT_TRUE(torch::equal(padded.padding, torch::tensor({0, 0, 0, 0, 0, 0, 0, 1}).to(torch::kBool).view({2, 4})));
  EXPECT_EQ(real_tokens(padded.ids, padded.padding).item<int64_t>(), 7);
}

TEST(QaHead, TokenTypesAddTheirEmbeddingRow) {
  torch::manual_seed(0);
  BertModel bert(tiny("m4", 16));
  bert->eval();
  std::vector<int64_t> ids{2, 11, 3, 13, 14};  // types 0 0 0 1 1 (sep_id 3)
  auto b = make_batch({&ids}, 0, torch::kCPU, 3);
  // Type 0 everywhere is what encode does without types.
  auto zeros = torch::zeros_like(b.types);
  EXPECT_TRUE(torch::equal(bert->encode(b.ids, b.padding, zeros), bert->encode(b.ids, b.padding)));
  // Type-1 tokens get row 1 instead of row 0: moving that difference into the word
  // embeddings of 13 and 14 (which occur only as type 1) gives the same hidden states.
  auto with_types = bert->encode(b.ids, b.padding, b.types);
  EXPECT_GT((with_types - bert->encode(b.ids, b.padding)).abs().max().item<double>(), 1e-4);
  torch::NoGradGuard no_grad;
  auto delta = bert->token_type_embeddings->weight[1] - bert->token_type_embeddings->weight[0];
  bert->word_embeddings->weight[13] += delta;
  bert->word_embeddings->weight[14] += delta;
  EXPECT_TRUE(torch::allclose(with_types, bert->encode(b.ids, b.padding), 1e-5, 1e-6));
}

// A fresh `dir` with a pretrained run dir/pre (the tiny_m4 preset, `method` and max_relative 0,
// random weights, a placeholder tokenizer) and the fine-tuning config dir/ft.yaml (`ft_yaml`):
// the request that fine-tunes one from the other.
FinetuneRequest pretrained_and_finetune_config(const fs::path& dir, const std::string& method, Config& pre,
                                               const std::string& ft_yaml) {
  remove_tree(dir);
  fs::create_directories(dir / "pre");
  pre = load_config(rpe::test::source_dir() + "/configs/pretrain/tiny_m4.yaml");
  pre.model.vocab_size = 50;
  pre.model.attention.method = method;
  pre.model.attention.max_relative = 0;
  BertModel model(pre.model);
  save_checkpoint(dir / "pre", *model, nullptr, TrainState{}, to_yaml(pre));
  std::ofstream(dir / "pre" / "tokenizer.model") << "";
  std::ofstream(dir / "ft.yaml") << ft_yaml;
  FinetuneRequest req;
  req.config_file = dir / "ft.yaml";
  req.init = (dir / "pre").string();
  return req;
}

// Fine-tuning trains in the pretraining's precision unless its config or a --set says otherwise;
// the rest of the pretraining's train section stays behind.
TEST(FinetuneConfig, TakesThePretrainingsPrecisionUnlessTold) {
  const fs::path dir = fs::temp_directory_path() / "rpe_ft_precision";
  Config pre;
  FinetuneRequest req = pretrained_and_finetune_config(dir, "m4", pre, "train:\n  lr: 3.0e-5\n");
  pre.train.precision = "bf16";
  pre.train.batch_size = 48;
  pre.train.decay_position_params = true;
  save_checkpoint(dir / "pre", *BertModel(pre.model), nullptr, TrainState{}, to_yaml(pre));
  const auto r = resolve_finetune_config(req);
  EXPECT_EQ(r.cfg.train.precision, "bf16");
  EXPECT_EQ(r.cfg.train.batch_size, TrainOptions{}.batch_size);
  // The position parameters' decay is the fine-tuning's own setting (its config or --set).
  EXPECT_FALSE(r.cfg.train.decay_position_params);
  req.sets = {"train.decay_position_params=true"};
  EXPECT_TRUE(resolve_finetune_config(req).cfg.train.decay_position_params);
  req.sets = {"train.precision=fp32"};
  EXPECT_EQ(resolve_finetune_config(req).cfg.train.precision, "fp32");
  std::ofstream(dir / "ft.yaml") << "train:\n  precision: fp32\n";
  req.sets.clear();
  EXPECT_EQ(resolve_finetune_config(req).cfg.train.precision, "fp32");
  remove_tree(dir);
}

TEST(FinetuneConfig, ResolvesOnTopOfCheckpointAndPinsK) {
  const fs::path dir = fs::temp_directory_path() / "rpe_ft_resolve";
  Config pre;
  FinetuneRequest req = pretrained_and_finetune_config(
      dir, "m4", pre, "finetune:\n  max_seq_len: 256\ntrain:\n  lr: 3.0e-5\nmodel:\n  max_position: 512\n");
  const auto r = resolve_finetune_config(req);
  EXPECT_EQ(r.cfg.model.hidden, pre.model.hidden);              // from the pretrained run
  EXPECT_DOUBLE_EQ(r.cfg.train.lr, 3e-5);                       // from the fine-tuning file
  EXPECT_EQ(r.cfg.train.batch_size, TrainOptions{}.batch_size);  // pretraining's train: dropped
  EXPECT_EQ(r.cfg.model.attention.max_relative, pre.model.max_position - 1);  // k kept
  EXPECT_EQ(r.cfg.data.tokenizer_model, (dir / "pre" / "tokenizer.model").string());
  EXPECT_EQ(r.pretrain_max_len, pre.data.max_seq_len);
  // The pinned k keeps the m4 tables' shapes, so the checkpoint loads into the longer model.
  BertModel longer(r.cfg.model);
  EXPECT_NO_THROW(load_checkpoint(r.checkpoint, *longer, nullptr));
  // A shape that does not fit: one-line error naming the checkpoint and the tensor.
  std::ofstream(dir / "ft2.yaml") << "model:\n  hidden: 64\n  heads: 2\n";
  req.config_file = dir / "ft2.yaml";
  const auto r2 = resolve_finetune_config(req);
  BertModel wide(r2.cfg.model);
  try {
    load_checkpoint(r2.checkpoint, *wide, nullptr);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("has shape"), std::string::npos) << e.what();
  }
  remove_tree(dir);
}

// transformer_xl's max_relative 0 means unclipped (its sinusoid reaches any distance, no table
// is sized by k): a longer fine-tuning length keeps it unclipped rather than pinning n - 1.
TEST(FinetuneConfig, UnclippedTransformerXlStaysUnclippedAtALongerMaxPosition) {
  const fs::path dir = fs::temp_directory_path() / "rpe_ft_resolve_xl";
  Config pre;
  const auto r =
      resolve_finetune_config(pretrained_and_finetune_config(dir, "transformer_xl", pre, "model:\n  max_position: 512\n"));
  EXPECT_EQ(r.cfg.model.max_position, 512);
  EXPECT_EQ(r.cfg.model.attention.max_relative, 0);  // still unclipped
  BertModel longer(r.cfg.model);
  EXPECT_NO_THROW(load_checkpoint(r.checkpoint, *longer, nullptr));
  EXPECT_NE(longer->position->describe().find("unclipped"), std::string::npos) << longer->position->describe();
  remove_tree(dir);
}

// The kept model of a seed: a second save replaces the first whole (weights and task.json of one
// evaluation together), and staging folders of a save that was killed are cleared away.
TEST(SavedModel, ASaveReplacesTheFolderWholeAndClearsDeadStaging) {
  const fs::path dir = fs::temp_directory_path() / "rpe_saved_model";
  remove_tree(dir);
  fs::create_directories(dir);
  Config cfg = load_config(rpe::test::source_dir() + "/configs/pretrain/tiny_m4.yaml");
  cfg.model.vocab_size = 50;
  std::ofstream(dir / "tokenizer.model") << "pieces";
  torch::manual_seed(0);
  BertModel first(cfg.model), second(cfg.model);
  SavedModelInfo info;
  info.task = "rte";
  info.labels = {"entailment", "not_entailment"};
  info.metric = "accuracy";
  info.step = 10;
  info.value = 55.0;
  save_finetuned_model(dir / "model", *first, cfg, dir / "tokenizer.model", info);
  fs::create_directories(dir / "model.tmp-4194999" / "model.pt");  // a save killed mid-way
  fs::create_directories(dir / "model.tmp-4194998.replaced");     // a fallback swap killed mid-way
  fs::create_directories(dir / "model.tmp-notes");                // not ours: kept
  const std::string live = "model.tmp-" + std::to_string(::getppid());  // a live process's save: kept
  fs::create_directories(dir / live);
  info.step = 20;
  info.value = 60.0;
  save_finetuned_model(dir / "model", *second, cfg, dir / "tokenizer.model", info);

  const SavedModel saved = read_saved_model(dir / "model");
  EXPECT_EQ(saved.info.step, 20);
  EXPECT_DOUBLE_EQ(saved.info.value, 60.0);
  EXPECT_EQ(saved.info.labels, info.labels);
  BertModel loaded(saved.cfg.model);
  load_saved_weights(saved, *loaded);
  EXPECT_TRUE(torch::equal(loaded->word_embeddings->weight, second->word_embeddings->weight));
  EXPECT_FALSE(torch::equal(loaded->word_embeddings->weight, first->word_embeddings->weight));
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  std::vector<std::string> want = {"model", "model.tmp-notes", live, "tokenizer.model"};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(left, want);
  remove_tree(dir);
}

namespace {
// An ItemTask whose micro-batches are the item indices themselves ([B] int64).
class IndexTask : public ItemTask {
 public:
  using ItemTask::ItemTask;
  BatchSums forward(const MicroBatch&) override { return {}; }

 protected:
  MicroBatch make_batch(const std::vector<int64_t>& items) override { return {{torch::tensor(items)}, {}}; }
};
std::vector<int64_t> items_of(const MicroBatch& b) {
  auto t = b.tensors[0].contiguous();
  return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()};
}
}  // namespace

// Fine-tuning data order under data parallelism: per optimizer step, the W ranks' micro-batches
// together are exactly the items one process takes (seeded order, every epoch a permutation).
TEST(FinetuneItems, RanksShareEachStepOfTheSingleProcessStream) {
  TrainOptions one;
  one.batch_size = 8;
  one.grad_accum = 2;
  IndexTask single(10, one, /*seed=*/4, /*rank=*/0, /*world=*/1);
  IndexTask r0(10, one, 4, 0, 2), r1(10, one, 4, 1, 2);
  std::vector<int64_t> seen;
  for (int step = 0; step < 5; ++step) {  // 40 items: four epochs of 10
    std::vector<int64_t> expect, got;
    for (int m = 0; m < 2; ++m) {
      auto s = items_of(single.next_batch());
      EXPECT_EQ(s.size(), 4u);
      expect.insert(expect.end(), s.begin(), s.end());
    }
    for (auto* r : {&r0, &r1})
      for (int m = 0; m < 2; ++m) {
        auto s = items_of(r->next_batch());
        EXPECT_EQ(s.size(), 2u);  // 8 / (2 micro-batches x 2 ranks)
        got.insert(got.end(), s.begin(), s.end());
      }
    EXPECT_EQ(got, expect) << "step " << step;
    seen.insert(seen.end(), expect.begin(), expect.end());
  }
  for (int epoch = 0; epoch < 4; ++epoch) {
    std::vector<int64_t> e(seen.begin() + epoch * 10, seen.begin() + (epoch + 1) * 10);
    std::sort(e.begin(), e.end());
    for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(e[i], i) << "epoch " << epoch;
  }
  EXPECT_EQ(single.count(MicroBatch{{torch::zeros({3, 5})}, {}}).item<double>(), 3.0);
}

// Dev evaluations at each epoch's end (10 items, batch 4: 3 steps per epoch), unless
// finetune.eval_each_epoch is false; periodic ones (eval_every) are the engine's, not the task's.
TEST(FinetuneItems, EvaluatesAtEachEpochsEndUnlessSwitchedOff) {
  TrainOptions t;
  t.batch_size = 4;
  IndexTask each(10, t, 1, 0, 1), none(10, t, 1, 0, 1, /*eval_each_epoch=*/false);
  std::vector<int64_t> due;
  for (int64_t step = 1; step <= 9; ++step) {
    if (each.eval_due(step)) due.push_back(step);
    EXPECT_FALSE(none.eval_due(step)) << step;
  }
  EXPECT_EQ(due, (std::vector<int64_t>{3, 6, 9}));
}

// `finetune --resume` continues the item stream from a checkpoint's cursor (an optimizer step's
// end) with the items an uninterrupted run draws: the epochs' shuffles are replayed from the
// seed. Batches of 4 of 10 items: steps end mid-epoch and on an epoch's last item alike, and
// the replay crosses several epochs (each one reshuffles).
TEST(FinetuneItems, AResumedStreamGoesOnAsTheUninterruptedOne) {
  TrainOptions t;
  t.batch_size = 4;
  t.grad_accum = 2;
  for (int stop = 1; stop <= 12; ++stop) {
    SCOPED_TRACE("resumed after step " + std::to_string(stop));
    IndexTask straight(10, t, /*seed=*/7, 0, 1), resumed(10, t, 7, 0, 1);
    LoaderCursor cursor;
    for (int i = 0; i < 2 * stop; ++i) cursor = straight.next_batch().cursor;
    resumed.restore(cursor);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(items_of(resumed.next_batch()), items_of(straight.next_batch())) << i;
  }
  IndexTask fresh(10, t, 7, 0, 1), restored(10, t, 7, 0, 1);
  restored.restore(LoaderCursor{});  // a fresh run's cursor: the stream from its start
  for (int i = 0; i < 8; ++i) EXPECT_EQ(items_of(restored.next_batch()), items_of(fresh.next_batch())) << i;
}
