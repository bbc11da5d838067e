// PyTorch binding of xsa's fused CPU attention (src/ops/attention.h): causal softmax(q kᵀ/√D) v
// with SA or XSA output, a per-head gate α_h, a per-head sink logit and grouped-query attention,
// in O(T) memory. Autograd lives in Python (xsa_torch/__init__.py); this file only packs tensors
// into the kernel's layout and calls it for float32 or float64.
//
// Two entry points of each direction:
//  - packed: qkv [B, T, C + 2·Hkv·D] exactly as c_attn (and RoPE) produce it, out [B, T, C];
//  - split:  q [B, H, T, D], k and v [B, Hkv, T, D] and out [B, H, T, D], the layout of
//            F.scaled_dot_product_attention, packed here into the kernel's layout.

// ATen and torch's pybind11 casters only: torch/extension.h (the whole C++ frontend) makes the
// compile several times slower.
#include <ATen/ATen.h>
#include <torch/csrc/utils/pybind.h>

#include <limits>

#include "xsa/ops/attention.h"

namespace {

using OptionalTensor = c10::optional<at::Tensor>;

void check_real_cpu(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.device().is_cpu(), "xsa_torch: ", name, " must be a CPU tensor");
  TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble, "xsa_torch: ", name,
              " must be float32 or float64, not ", t.scalar_type());
}

// A per-head parameter (gate α or sink logit) as a contiguous [H] tensor of the kernel's dtype;
// undefined when absent.
at::Tensor per_head(const OptionalTensor& t, int64_t H, at::ScalarType dtype, const char* name) {
  if (!t.has_value() || !t->defined()) return at::Tensor();
  check_real_cpu(*t, name);
  TORCH_CHECK(t->dim() == 1 && t->size(0) == H, "xsa_torch: ", name, " must have shape [", H,
              "], not ", t->sizes());
  return t->to(dtype).contiguous();
}

template <typename Real>
Real* data_or_null(const at::Tensor& t) {
  return t.defined() ? t.data_ptr<Real>() : nullptr;
}

struct Shape {
  int64_t B, T, H, Hkv, D;
  int64_t C() const { return H * D; }
  int64_t width() const { return (H + 2 * Hkv) * D; }  // a token's row of qkv
};

Shape packed_shape(const at::Tensor& qkv, int64_t H, int64_t Hkv) {
  check_real_cpu(qkv, "qkv");
  TORCH_CHECK(qkv.dim() == 3, "xsa_torch: qkv must be [B, T, C + 2*Hkv*D], not ", qkv.sizes());
  TORCH_CHECK(H > 0 && Hkv > 0 && H % Hkv == 0, "xsa_torch: ", Hkv, " key/value heads must divide ",
              H, " heads");
  const int64_t W = qkv.size(2);
  TORCH_CHECK(W % (H + 2 * Hkv) == 0, "xsa_torch: qkv width ", W, " is not (", H, " + 2*", Hkv,
              ") heads of one size");
  return {qkv.size(0), qkv.size(1), H, Hkv, W / (H + 2 * Hkv)};
}

template <typename Real>
xsa::ops::AttentionArgs<Real> kernel_args(const Shape& s, bool exclusive, const at::Tensor& qkv,
                                          const at::Tensor& alpha, const at::Tensor& sink) {
  xsa::ops::AttentionArgs<Real> args;
  args.B = (int)s.B, args.T = (int)s.T, args.C = (int)s.C(), args.H = (int)s.H;
  args.Hkv = (int)s.Hkv, args.exclusive = exclusive;
  args.qkv = qkv.data_ptr<Real>();
  args.alpha = data_or_null<Real>(alpha), args.sink = data_or_null<Real>(sink);
  return args;
}

void check_options(const Shape& s, bool exclusive, const at::Tensor& alpha) {
  TORCH_CHECK(s.B > 0 && s.T > 0 && s.D > 0, "xsa_torch: empty attention input");
  // AttentionArgs holds its sizes as int.
  const int64_t int_max = std::numeric_limits<int>::max();
  TORCH_CHECK(s.B <= int_max && s.T <= int_max && s.width() <= int_max,
              "xsa_torch: input too large");
  TORCH_CHECK(!alpha.defined() || exclusive, "xsa_torch: a gate needs exclusive=True");
}

// What the forward and the backward both start from: the packed input made contiguous, the
// per-head gate and sink checked, the options checked.
struct Inputs {
  Shape shape;
  at::Tensor qkv, alpha, sink;
};
Inputs checked_inputs(const at::Tensor& qkv_in, int64_t H, int64_t Hkv, bool exclusive,
                      const OptionalTensor& alpha_in, const OptionalTensor& sink_in) {
  Inputs in{packed_shape(qkv_in, H, Hkv), qkv_in.contiguous(), {}, {}};
  in.alpha = per_head(alpha_in, H, in.qkv.scalar_type(), "gate");
  in.sink = per_head(sink_in, H, in.qkv.scalar_type(), "sink");
  check_options(in.shape, exclusive, in.alpha);
  return in;
}

// Returns (out [B, T, C], y [B, T, C], lse [B, H, T]); out is y itself for SA.
std::vector<at::Tensor> forward_packed(const at::Tensor& qkv_in, int64_t H, int64_t Hkv,
                                       bool exclusive, const OptionalTensor& alpha_in,
                                       const OptionalTensor& sink_in) {
  const Inputs in = checked_inputs(qkv_in, H, Hkv, exclusive, alpha_in, sink_in);
  const Shape& s = in.shape;
  const at::Tensor &qkv = in.qkv, &alpha = in.alpha, &sink = in.sink;
  at::Tensor y = at::empty({s.B, s.T, s.C()}, qkv.options());
  at::Tensor lse = at::empty({s.B, s.H, s.T}, qkv.options());
  at::Tensor z = exclusive ? at::empty_like(y) : y;
  AT_DISPATCH_FLOATING_TYPES(qkv.scalar_type(), "xsa_attention_forward", [&] {
    auto args = kernel_args<scalar_t>(s, exclusive, qkv, alpha, sink);
    args.y = y.data_ptr<scalar_t>(), args.lse = lse.data_ptr<scalar_t>();
    args.z = exclusive ? z.data_ptr<scalar_t>() : nullptr;
    pybind11::gil_scoped_release no_gil;  // the kernel runs its own OpenMP threads
    xsa::ops::attention_forward(args);
  });
  return {z, y, lse};
}

// Returns (dqkv [B, T, C + 2·Hkv·D], dalpha [H] or undefined, dsink [H] or undefined).
std::vector<at::Tensor> backward_packed(const at::Tensor& grad_out, const at::Tensor& qkv_in,
                                        const at::Tensor& y, const at::Tensor& lse, int64_t H,
                                        int64_t Hkv, bool exclusive, const OptionalTensor& alpha_in,
                                        const OptionalTensor& sink_in) {
  const Inputs in = checked_inputs(qkv_in, H, Hkv, exclusive, alpha_in, sink_in);
  const Shape& s = in.shape;
  const at::Tensor &qkv = in.qkv, &alpha = in.alpha, &sink = in.sink;
  TORCH_CHECK(y.is_contiguous() && lse.is_contiguous() && y.scalar_type() == qkv.scalar_type(),
              "xsa_torch: y and lse must be the forward's own");
  // The kernel turns ∂L/∂z into ∂L/∂y in place: work on a copy, never on autograd's gradient.
  TORCH_CHECK(grad_out.numel() == s.B * s.T * s.C(), "xsa_torch: the gradient has ",
              grad_out.numel(), " elements, not B*T*C = ", s.B * s.T * s.C());
  at::Tensor d_out = at::empty({s.B, s.T, s.C()}, qkv.options());
  d_out.view(grad_out.sizes()).copy_(grad_out);  // [B, T, C] or [B, T, H, D]: one copy
  at::Tensor dqkv = at::zeros_like(qkv);         // the kernel accumulates
  at::Tensor dalpha_token =
      alpha.defined() ? at::empty({s.B * s.T, H}, qkv.options()) : at::Tensor();
  at::Tensor dsink_sequence = sink.defined() ? at::empty({s.B, H}, qkv.options()) : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES(qkv.scalar_type(), "xsa_attention_backward", [&] {
    auto args = kernel_args<scalar_t>(s, exclusive, qkv, alpha, sink);
    args.y = y.data_ptr<scalar_t>(), args.lse = lse.data_ptr<scalar_t>();
    args.dqkv = dqkv.data_ptr<scalar_t>(), args.d_out = d_out.data_ptr<scalar_t>();
    args.dalpha = data_or_null<scalar_t>(dalpha_token);
    args.dsink = data_or_null<scalar_t>(dsink_sequence);
    pybind11::gil_scoped_release no_gil;
    xsa::ops::attention_backward(args);
  });
  // The gate and the sink are shared by every token of every sequence: sum their gradients.
  return {dqkv, alpha.defined() ? dalpha_token.sum(0) : at::Tensor(),
          sink.defined() ? dsink_sequence.sum(0) : at::Tensor()};
}

// A [B, T, heads·D] slice of qkv, starting at column `first`, seen as [B, heads, T, D].
at::Tensor heads_view(const at::Tensor& qkv, int64_t first, int64_t heads, int64_t D) {
  return qkv.narrow(2, first, heads * D).view({qkv.size(0), qkv.size(1), heads, D}).transpose(1, 2);
}

// Returns (out [B, H, T, D] contiguous, qkv, y, lse): qkv, y and lse are what the backward needs.
std::vector<at::Tensor> forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                bool exclusive, const OptionalTensor& alpha,
                                const OptionalTensor& sink) {
  auto check_input = [](const at::Tensor& t, const char* name) {
    check_real_cpu(t, name);
    TORCH_CHECK(t.dim() == 4, "xsa_torch: ", name, " must be [B, heads, T, D], not ", t.sizes());
  };
  check_input(q, "q"), check_input(k, "k"), check_input(v, "v");
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3), Hkv = k.size(1);
  TORCH_CHECK(k.sizes() == v.sizes() && k.size(0) == B && k.size(2) == T && k.size(3) == D,
              "xsa_torch: k and v must be [", B, ", kv_heads, ", T, ", ", D, "], not ", k.sizes(),
              " and ", v.sizes());
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
              "xsa_torch: q, k and v must share one dtype");
  at::Tensor qkv = at::empty({B, T, (H + 2 * Hkv) * D}, q.options());
  heads_view(qkv, 0, H, D).copy_(q);
  heads_view(qkv, H * D, Hkv, D).copy_(k);
  heads_view(qkv, (H + Hkv) * D, Hkv, D).copy_(v);
  std::vector<at::Tensor> r = forward_packed(qkv, H, Hkv, exclusive, alpha, sink);
  at::Tensor out = r[0].view({B, T, H, D}).transpose(1, 2).contiguous();
  return {out, qkv, r[1], r[2]};
}

// Returns (dq, dk, dv, dalpha or undefined, dsink or undefined); dq, dk, dv are views of one
// packed gradient.
std::vector<at::Tensor> backward(const at::Tensor& grad_out, const at::Tensor& qkv,
                                 const at::Tensor& y, const at::Tensor& lse, int64_t H, int64_t Hkv,
                                 bool exclusive, const OptionalTensor& alpha,
                                 const OptionalTensor& sink) {
  const int64_t D = qkv.size(2) / (H + 2 * Hkv);
  TORCH_CHECK(grad_out.dim() == 4 && grad_out.size(1) == H, "xsa_torch: the gradient must be [B, ",
              H, ", T, D], not ", grad_out.sizes());
  std::vector<at::Tensor> r =
      backward_packed(grad_out.transpose(1, 2), qkv, y, lse, H, Hkv, exclusive, alpha, sink);
  const at::Tensor& dqkv = r[0];
  return {heads_view(dqkv, 0, H, D), heads_view(dqkv, H * D, Hkv, D),
          heads_view(dqkv, (H + Hkv) * D, Hkv, D), r[1], r[2]};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "xsa's fused CPU attention kernels (SA, XSA, gated XSA, sinks, GQA)";
  m.def("forward_packed", &forward_packed, "attention forward on packed qkv [B, T, C + 2*Hkv*D]",
        pybind11::arg("qkv"), pybind11::arg("heads"), pybind11::arg("kv_heads"),
        pybind11::arg("exclusive"), pybind11::arg("gate"), pybind11::arg("sink"));
  m.def("backward_packed", &backward_packed, "attention backward on packed qkv",
        pybind11::arg("grad_out"), pybind11::arg("qkv"), pybind11::arg("y"), pybind11::arg("lse"),
        pybind11::arg("heads"), pybind11::arg("kv_heads"), pybind11::arg("exclusive"),
        pybind11::arg("gate"), pybind11::arg("sink"));
  m.def("forward", &forward, "attention forward on q [B, H, T, D], k and v [B, Hkv, T, D]",
        pybind11::arg("q"), pybind11::arg("k"), pybind11::arg("v"), pybind11::arg("exclusive"),
        pybind11::arg("gate"), pybind11::arg("sink"));
  m.def("backward", &backward, "attention backward, gradients for q, k, v, gate and sink",
        pybind11::arg("grad_out"), pybind11::arg("qkv"), pybind11::arg("y"), pybind11::arg("lse"),
        pybind11::arg("heads"), pybind11::arg("kv_heads"), pybind11::arg("exclusive"),
        pybind11::arg("gate"), pybind11::arg("sink"));
}
