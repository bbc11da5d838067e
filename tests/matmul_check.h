// One fp32 matrix product checked against the float64 reference (src/ops/reference.h), each entry
// within the bound its roundings allow for any summation order (bounds.h): y = x·Wᵀ, dx, dw
// accumulated onto dw0, and y accumulated onto what is there. The inputs and results come back for
// the caller's own further checks.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "bounds.h"
#include "test_util.h"
#include "xsa/ops/ops.h"
#include "xsa/ops/reference.h"

namespace xsa::test {

struct MatmulCase {
  Vec x, w, dout, dw0, y_ref, dw_ref, dw_bound;
  std::vector<float> xf, wf, doutf;
};

// w and dw0 drawn at their own scales (a model's weights are small, its gradients smaller).
inline MatmulCase check_matmul(int N, int in, int out, double w_scale = 1.0,
                               double dw0_scale = 1.0) {
  MatmulCase m;
  m.x = random_vector(N * in, 1);
  m.w = random_vector(out * in, 2, w_scale);
  m.dout = random_vector(N * out, 3);
  m.dw0 = random_vector(out * in, 4, dw0_scale);  // gradients accumulate into what is there
  Vec dx_ref(N * in);
  m.y_ref.resize(N * out);
  m.dw_ref = m.dw0;
  ref::matmul_forward(m.y_ref.data(), m.x.data(), m.w.data(), N, in, out);
  ref::matmul_backward(dx_ref.data(), m.dw_ref.data(), m.dout.data(), m.x.data(), m.w.data(), N, in,
                       out);

  m.xf = cast_vector<float>(m.x);
  m.wf = cast_vector<float>(m.w);
  m.doutf = cast_vector<float>(m.dout);
  std::vector<float> yf(N * out), dxf(N * in), dwf = cast_vector<float>(m.dw0);
  ops::matmul_forward(yf.data(), m.xf.data(), m.wf.data(), N, in, out);
  ops::matmul_backward(dxf.data(), dwf.data(), m.doutf.data(), m.xf.data(), m.wf.data(),
                       {N, in, out});
  const double u = kFloatRoundoff;
  Vec dx_bound;
  matmul_backward_bound(dx_bound, m.dw_bound, m.dout, m.x, m.w, m.dw0, N, in, out, u);
  EXPECT_TRUE(within(yf, m.y_ref, matmul_forward_bound(m.x, m.w, N, in, out, nullptr, u), "y"));
  EXPECT_TRUE(within(dxf, dx_ref, dx_bound, "dx"));
  EXPECT_TRUE(within(dwf, m.dw_ref, m.dw_bound, "dw"));

  // accumulate = true adds onto the output
  std::vector<float> acc = m.doutf;
  ops::matmul_forward(acc.data(), m.xf.data(), m.wf.data(), N, in, out, true);
  Vec acc_ref(N * out);
  for (size_t i = 0; i < acc_ref.size(); i++) acc_ref[i] = m.y_ref[i] + m.dout[i];
  EXPECT_TRUE(within(acc, acc_ref, matmul_forward_bound(m.x, m.w, N, in, out, &m.dout, u),
                     "y accumulated"));
  return m;
}

}  // namespace xsa::test
