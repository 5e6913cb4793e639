// Method swap (Huang et al. 2020, section 4.4): start a model with a relative position
// method from a checkpoint trained with another one (typically absolute BERT), adding
// the new method's parameters so that the model starts as the loaded function.
//
// The target model is built from the new config; every tensor it shares with the
// checkpoint is copied. Tensors only the target has must belong to its position method:
// with identity_init they start neutral: zero tables where the method's registry entry says
// zero is neutral (additive terms such as m4's: q.0 = 0 adds nothing); multiplicative
// gates keep their own init, which starts at or near 1. The checkpoint's absolute table is kept when the target config has it
// (method absolute, or model.attention.add_absolute: true) and dropped otherwise; dropping
// it changes the function, which the returned probe difference shows.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "config/config.h"
#include "model/bert.h"

namespace rpe {

struct SwapOptions {
  bool identity_init = true;  // false: new position parameters keep the method's random init
  bool verify = true;         // compare logits of the loaded and the new model on a probe input
  bool report = true;         // log the one-line account of what was loaded (once per run, not per seed)
};

struct SwapReport {
  std::vector<std::string> loaded;   // tensors copied from the checkpoint
  std::vector<std::string> added;    // new position-method tensors (initialised here)
  std::vector<std::string> dropped;  // checkpoint tensors the target has no place for
  double probe_max_diff = -1.0;      // max |logit difference| on the probe (-1 = not run); 0 = same function
  // Same method, other attention options (deberta_p2c, t5_max_distance, rope_base, ...), as
  // "key: before -> after": the tensors are loaded as they are; warned unless the probe shows
  // the same function (an option the method does not read).
  std::vector<std::string> changed_options;
};

SwapOptions swap_options_from(const InitOptions& init);

// Loads `checkpoint` into `model` (see above). UserError, naming the tensor, when a shared
// tensor has another shape, when a non-position tensor is missing on either side, or when
// the file is not a readable checkpoint.
SwapReport load_pretrained_encoder(BertModelImpl& model, const std::filesystem::path& checkpoint,
                                   const SwapOptions& options = {});

}  // namespace rpe
