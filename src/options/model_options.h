// The model's options in one table, as the run's are (options/run_config.h): each option's
// config.json key, command-line flag, help and roles, read by the code that declares the options,
// checks them against a checkpoint and lays a preset under them, so that a new shape option is
// declared once. Their values are checked together by ModelConfig::validate (model/model_config.h),
// since most constrain each other (C % H, H % Hkv, even head sizes).
#pragma once

#include <cmath>
#include <string_view>
#include <type_traits>

#include "xsa/model/model_config.h"

namespace xsa {

// A model option's roles.
enum ModelOptionRole : unsigned {
  kShapeOfWeights = 1,  // part of the model a checkpoint fixes (the weights' shapes, the head's
                        // cap): a checkpoint's value wins, a contradiction is refused
  kContext = 2,         // the context: a run from --init-from may choose its own
};

struct ModelOption {
  const char* key;   // config.json key
  const char* flag;  // command-line flag
  const char* help;
  unsigned roles;
  // The values it may take, checked where it enters (the command line, --config), before any code
  // sizes memory by it; ModelConfig::validate holds the same maxima for files.
  double least = -HUGE_VAL, most = HUGE_VAL;
};

// Calls fn(option, field) for every shape option of ModelConfig, in one order. Model is
// ModelConfig or const ModelConfig.
template <typename Model, typename Fn>
void for_each_model_option(Model& m, Fn&& fn) {
  static_assert(std::is_same_v<std::remove_const_t<Model>, ModelConfig>);
  fn(ModelOption{"n_layer", "--layers", "Transformer blocks (L)", kShapeOfWeights, 1, kMaxLayers},
     m.n_layer);
  fn(ModelOption{"n_head", "--heads", "Attention heads (H)", kShapeOfWeights, 1, kMostWidth},
     m.n_head);
  fn(ModelOption{"n_kv_head", "--kv-heads",
                 "Key/value heads, grouped-query attention (0: one per head)", kShapeOfWeights, 0,
                 kMostWidth},
     m.n_kv_head);
  fn(ModelOption{"n_embd", "--embd", "Embedding width (C)", kShapeOfWeights, 1, kMostWidth},
     m.n_embd);
  fn(ModelOption{"seq_len", "--seq-len", "Context length (T)", kShapeOfWeights | kContext, 1,
                 kMostSequence},
     m.seq_len);
  fn(ModelOption{"rope_theta", "--rope-theta", "RoPE base", kShapeOfWeights, 1e-30, 1e30},
     m.rope_theta);
  fn(ModelOption{"logit_softcap", "--logit-softcap",
                 "Soft-cap the logits at c: c·tanh(logits/c) before the loss and before sampling "
                 "(Gemma 2, modded-nanogpt; 0: off)",
                 kShapeOfWeights, 0, 1e6},
     m.logit_softcap);
}

// `to`'s options (a ModelConfig or a RunConfig, for_each walking its table) whose flag `given`
// says is not on the command line take `from`'s values: a preset laid under the command line.
template <typename Config, typename ForEach, typename Given>
void take_options_not_given(Config& to, const Config& from, ForEach&& for_each, Given&& given) {
  for_each(to, [&](const auto& option, auto& field) {
    if (given(option.flag)) return;
    for_each(from, [&](const auto& other, const auto& value) {
      if constexpr (std::is_same_v<std::decay_t<decltype(field)>, std::decay_t<decltype(value)>>)
        if (std::string_view(other.key) == option.key) field = value;
    });
  });
}

}  // namespace xsa
