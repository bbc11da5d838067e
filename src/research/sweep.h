// xsa sweep: xsa compare once per value of one option (sequence length, learning rate, width,
// depth, training length, ...), and the XSA-vs-SA difference, with its seed spread, against that
// value: where, on this data, does XSA start to pay?
#pragma once

#include <string>
#include <vector>

#include "xsa/research/compare.h"

namespace xsa {

// Sets option `param` (seq-len, lr, embd, layers, heads, kv-heads, steps, batch, warmup,
// weight-decay; precision, whose values are fp32 and bf16) of cfg; throws Error naming a parameter
// it does not know or a value it cannot take.
void apply_sweep_param(CompareConfig& cfg, const std::string& param, const std::string& value);

// Runs compare for every value into <out>/<param>-<value>/, then writes <out>/sweep.md,
// sweep.json and delta_vs_<param>.svg (.png). tokens_per_step > 0 holds the tokens of every
// optimizer step at that for every value: each value's micro-batch and accumulation follow from
// its sequence length (RunConfig::batch_for_step_tokens, --batch the most rows per micro-batch),
// so that a length sweep does not also change the batch.
void sweep(const CompareConfig& base, const std::string& param,
           const std::vector<std::string>& values, int64_t tokens_per_step = 0);

}  // namespace xsa
