#include "xsa/model/params.h"

#include <cmath>

#include "xsa/util/error.h"
#include "xsa/util/rng.h"

namespace xsa {

bool is_hidden_matrix(const std::string& name) {
  if (name.rfind("transformer.h.", 0) != 0) return false;
  for (const char* suffix : {".attn.c_attn.weight", ".attn.c_proj.weight", ".attn.c_gate.weight",
                             ".mlp.c_fc.weight", ".mlp.c_proj.weight"}) {
    const size_t n = std::char_traits<char>::length(suffix);
    if (name.size() > n && name.compare(name.size() - n, n, suffix) == 0) return true;
  }
  return false;
}

std::vector<TensorInfo> param_layout(const ModelConfig& cfg) {
  std::vector<TensorInfo> layout;
  Weights<float> unused;
  size_t offset = 0;
  for_each_tensor(cfg, unused,
                  [&](const std::string& name, const std::vector<int64_t>& shape, bool decay,
                      Init init, float*&) {
                    TensorInfo t{name, shape, offset, 1, decay, init};
                    for (int64_t d : shape) t.numel *= d;
                    offset += align_elements<float>(t.numel);
                    layout.push_back(std::move(t));
                  });
  return layout;
}

size_t param_arena_size(const std::vector<TensorInfo>& layout) {
  if (layout.empty()) return 0;
  return layout.back().offset + align_elements<float>(layout.back().numel);
}

template <typename Real>
ParamArena<Real>::ParamArena(const ModelConfig& cfg, bool training_state, Backend<Real>& backend)
    : layout(param_layout(cfg)) {
  size_t n = param_arena_size(layout);
  params = DeviceBuffer<Real>(backend, n,
                              training_state ? MemoryUse::weights : MemoryUse::inference_weights);
  w = point_weights(cfg, params.data());
  if (!training_state) return;
  grads = DeviceBuffer<Real>(backend, n, MemoryUse::gradients);
  adam_m = DeviceBuffer<Real>(backend, n, MemoryUse::optimizer);
  adam_v = DeviceBuffer<Real>(backend, n, MemoryUse::optimizer);
  dw = point_weights(cfg, grads.data());
}

template <typename Real>
void ParamArena<Real>::keep_moments(size_t begin, size_t end) {
  XSA_CHECK(begin <= end && end <= params.size() && adam_m.size() > 0,
            "moments [{}, {}) of {} parameters", begin, end, params.size());
  Backend<Real>& backend = *adam_m.backend();
  adam_m = DeviceBuffer<Real>(), adam_v = DeviceBuffer<Real>();  // released first
  adam_m = DeviceBuffer<Real>(backend, end - begin, MemoryUse::optimizer);
  adam_v = DeviceBuffer<Real>(backend, end - begin, MemoryUse::optimizer);
  moments_begin = begin;
}

template <typename Real>
void ParamArena<Real>::init(const ModelConfig& cfg, uint64_t seed) {
  const double std_normal = 0.02;
  const double std_residual = 0.02 / std::sqrt(2.0 * cfg.n_layer);
  HostView<Real> host(params, /*write_back=*/true);
  for (const TensorInfo& t : layout) {
    Real* p = host.data() + t.offset;
    Rng rng(hash_name(t.name, seed));
    size_t rows_real = t.numel;
    if (t.name == "transformer.wte.weight") rows_real = (size_t)cfg.vocab_size * cfg.n_embd;
    for (size_t i = 0; i < t.numel; i++) {
      switch (t.init) {
        case Init::normal:
          p[i] = i < rows_real ? Real(std_normal * rng.normal()) : Real(0);
          break;
        case Init::normal_residual:
          p[i] = Real(std_residual * rng.normal());
          break;
        case Init::ones:
          p[i] = 1;
          break;
        case Init::zeros:
          p[i] = 0;
          break;
        case Init::half:
          p[i] = Real(0.5);
          break;
      }
    }
  }
  if (params.backend()) params.backend()->weights_changed(params.data(), params.size());
}

template struct ParamArena<float>;
template struct ParamArena<double>;

}  // namespace xsa
