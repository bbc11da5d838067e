// The attention similarity bias (docs/SPEC.md §2), per layer and head, measured on data: the mean
// cos(y_i, v_i) between a token's attention output (before W_o) and its own value, position 0
// excluded (there y = v); for XSA layers also |cos(z_i, v_i)| (≈ 0); the mean self-attention weight
// a_ii; the mean cos(v_i, v_j) over pairs j < i (how alike the values are to begin with); and the
// mean cos(y_i, v_j) over j < i, how far y leans to the other tokens' values: where values are
// alike, y leans to every one of them, its own included, and cos(y_i, v_i) alone overstates the
// bias; cos(y_i, v_i) − cos(y_i, v_j) is the lean to its own value beyond that.
#pragma once

#include <vector>

#include "xsa/data/dataset.h"
#include "xsa/model/gpt.h"

namespace xsa {

struct HeadBias {
  int layer = 0, head = 0;
  bool exclusive = false;
  double cos_yv = 0;       // mean cos(y_i, v_i)
  double cos_zv = 0;       // mean |cos(z_i, v_i)|, XSA layers only (NaN for SA); ≈ 0 for XSA,
                           // 1 − α of the way back for gated XSA
  double self_weight = 0;  // mean a_ii
  double cos_vv = 0;       // mean cos(v_i, v_j), j < i
  double cos_y_vj = 0;     // mean cos(y_i, v_j), j < i
  // The lean to its own value beyond the lean to the others'.
  double own_lean() const { return cos_yv - cos_y_vj; }
};

// Runs the model on the first n_batches fixed windows of `data` and averages over every token.
std::vector<HeadBias> attention_similarity_bias(Gpt<float>& model, const TokenStream& data,
                                                int n_batches);

// Mean cos(y_i, v_i) over every layer and head: the model's similarity bias in one figure (NaN
// for no heads); and the same of own_lean().
double mean_cos_yv(const std::vector<HeadBias>& heads);
double mean_own_lean(const std::vector<HeadBias>& heads);

}  // namespace xsa
