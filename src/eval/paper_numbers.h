// Published numbers of Huang et al. 2020 ("Improve Transformer Models with Better Relative
// Position Embeddings"), dev sets, in %. Tables 2-4 (BERT-base) and 5 (BERT-large), verbatim.
#pragma once
#include <string>
#include <vector>

namespace rpe::eval::paper {

struct SquadRow {
  const char* method;  // our method name ("bert" = Devlin et al.'s published BERT)
  double em, f1;
};
// Table 2: SQuAD 1.1 dev.
inline const std::vector<SquadRow> kTable2 = {
    {"bert", 80.8, 88.5},    {"absolute", 81.58, 88.59}, {"shaw", 82.38, 89.37}, {"m1", 80.82, 87.96},
    {"m2", 81.44, 88.86},    {"m3", 83.71, 90.50},       {"m4", 83.63, 90.53},
};

struct GlueRow {
  const char* method;
  double mnli_m, mnli_mm, qqp_f1, sst2_acc, mrpc_f1;
};
// Table 3: GLUE dev (MNLI accuracy m/mm, QQP F1, SST-2 accuracy, MRPC F1).
inline const std::vector<GlueRow> kTable3 = {
    {"bert", 84.6, 83.4, 71.2, 93.5, 88.9},          {"absolute", 83.57, 83.65, 87.64, 90.48, 88.40},
    {"shaw", 84.10, 84.07, 87.77, 90.94, 88.68},     {"m1", 83.84, 84.06, 87.52, 91.97, 88.65},
    {"m2", 83.68, 83.78, 87.50, 91.05, 87.34},       {"m3", 84.81, 84.68, 87.11, 91.39, 82.86},
    {"m4", 84.45, 84.51, 87.41, 91.74, 88.88},
};

struct KRow {
  int k, pretrain_len, finetune_len;
  double em, f1;
};
// Table 4: method 4 on SQuAD 1.1 dev by clipping distance k and fine-tuning length.
inline const std::vector<KRow> kTable4 = {
    {2, 512, 512, 82.17, 89.19},   {4, 512, 512, 82.44, 89.37},   {8, 512, 512, 82.64, 89.59},
    {16, 512, 512, 83.42, 90.18},  {32, 512, 512, 83.58, 90.30},  {64, 512, 512, 83.40, 90.21},
    {128, 512, 512, 83.20, 90.03}, {256, 512, 512, 83.59, 90.54}, {512, 512, 512, 83.63, 90.53},
    {256, 512, 576, 83.80, 90.71}, {256, 512, 640, 83.97, 90.68}, {256, 512, 704, 83.44, 90.32},
};

struct LenRow {
  int finetune_len;
  double em, f1;
};
// Table 5 (BERT-large, SQuAD 1.1 dev): the pretrained absolute model (bert-large-uncased-whole-
// word-masking, fine-tuned at 512) and method 4 added to it, fine-tuned at each length.
// Its first row: Devlin et al.'s published BERT-large (512/512), as the paper prints it.
inline constexpr SquadRow kTable5Bert = {"bert", 84.1, 90.9};
inline constexpr SquadRow kTable5Absolute = {"absolute", 86.91, 93.15};
inline const std::vector<LenRow> kTable5M4 = {
    {512, 87.51, 93.55}, {576, 87.40, 93.48}, {640, 87.57, 93.49}, {704, 87.16, 93.47}};

}  // namespace rpe::eval::paper
