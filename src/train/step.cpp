#include "xsa/train/step.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "xsa/util/arena.h"
#include "xsa/util/error.h"

namespace xsa {

TrainStep::TrainStep(Gpt<float>& model, const OptimizerSettings& settings, Parallelism parallel)
    : model_(model),
      settings_(settings),
      device_comm_(
          parallel.comm && parallel.comm->size() > 1 && !model.backend().host_addressable()
              ? std::make_unique<DeviceComm>(
                    *parallel.comm, model.backend(),
                    device_collectives(*parallel.comm, model.backend(), parallel.comm_choice))
              : nullptr),
      comm_(device_comm_    ? device_comm_.get()
            : parallel.comm ? parallel.comm
                            : &alone_),
      zero1_(parallel.zero1 && comm_->size() > 1),
      overlap_(parallel.overlap && !zero1_ && comm_->size() > 1) {
  ParamArena<float>& arena = model_.params();
  const size_t n = arena.params.size();
  owned_ = zero1_ ? comm_->my_shard(n) : ShardRange{0, n};
  if (zero1_) arena.keep_moments(owned_.begin, owned_.end);
  if (settings_.muon) {
    // Each hidden matrix (c_attn as its q, k and v row blocks) with a rank to orthogonalise it:
    // the largest first, each to the rank with the least work so far (rows · cols · min of the
    // two, the iteration's products), so the ranks share the products and every rank knows who
    // does what.
    const ModelConfig& cfg = model_.config();
    const int C = cfg.n_embd, Ck = cfg.kv_heads() * cfg.head_dim();
    for (const TensorInfo& t : arena.layout) {
      if (!is_hidden_matrix(t.name)) continue;
      const int rows = (int)t.shape[0], cols = (int)t.shape[1];
      if (t.name.find(".attn.c_attn.") != std::string::npos) {
        size_t at = t.offset;
        for (int part : {C, Ck, Ck}) {
          muon_matrices_.push_back({at, part, cols, 0});
          at += (size_t)part * cols;
        }
      } else {
        muon_matrices_.push_back({t.offset, rows, cols, 0});
      }
    }
    std::vector<size_t> order(muon_matrices_.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = i;
    auto work = [&](size_t i) {
      const MuonMatrix& m = muon_matrices_[i];
      return (double)m.rows * m.cols * std::min(m.rows, m.cols);
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return work(a) > work(b); });
    std::vector<double> load(comm_->size(), 0.0);
    size_t most = 0, most_k = 0;
    for (size_t i : order) {
      const int r = (int)(std::min_element(load.begin(), load.end()) - load.begin());
      muon_matrices_[i].owner = r, load[r] += work(i);
      const MuonMatrix& m = muon_matrices_[i];
      most = std::max(most, (size_t)m.rows * m.cols);
      most_k = std::max(most_k, (size_t)std::min(m.rows, m.cols));
    }
    // This rank's matrices in batches of one shape (up to kMuonBatch, the largest shapes first),
    // which a backend may orthogonalise side by side.
    for (size_t i : order) {
      const MuonMatrix& m = muon_matrices_[i];
      if (m.owner != comm_->rank()) continue;
      bool joined = false;
      for (std::vector<size_t>& batch : muon_batches_) {
        const MuonMatrix& first = muon_matrices_[batch[0]];
        if (first.rows == m.rows && first.cols == m.cols && batch.size() < kMuonBatch) {
          batch.push_back(i), joined = true;
          break;
        }
      }
      if (!joined) muon_batches_.push_back({i});
    }
    // x and next [kMuonBatch, rows, cols], gram, gram2 and poly [kMuonBatch, k, k] for the
    // largest shape; each part 64-byte aligned.
    muon_part_ = align_elements<float>(most), muon_square_ = align_elements<float>(most_k * most_k);
    muon_scratch_ = DeviceBuffer<float>(
        model_.backend(), kMuonBatch * (2 * muon_part_ + 3 * muon_square_), MemoryUse::optimizer);
    arena.muon_m = DeviceBuffer<float>(model_.backend(), n, MemoryUse::optimizer);
  }
  const int L = model_.config().n_layer;
  layer_grads_.assign(L, ShardRange{n, 0});
  for (const TensorInfo& t : arena.layout) {
    int l = -1;
    if (std::sscanf(t.name.c_str(), "transformer.h.%d.", &l) != 1 || l < 0 || l >= L) continue;
    layer_grads_[l].begin = std::min(layer_grads_[l].begin, t.offset);
    layer_grads_[l].end = std::max(layer_grads_[l].end, t.offset + align_elements<float>(t.numel));
  }
}

StepResult TrainStep::run(const int32_t* inputs, const int32_t* targets, double lr, int64_t step,
                          int micro_batches, int64_t step_tokens) {
  ParamArena<float>& arena = model_.params();
  Backend<float>& be = model_.backend();
  Comm& comm = *comm_;
  const size_t n = arena.grads.size();
  const size_t rows = (size_t)model_.batch_size() * model_.seq_len();
  if (step_tokens <= 0) {
    int64_t count = 0;
    for (size_t i = 0; i < rows * micro_batches; i++) count += targets[i] >= 0;
    step_tokens = (int64_t)comm.sum((double)count);
  }
  StepResult r;
  double loss = 0;
  float* grads = arena.grads.data();
  for (int k = 0; k < micro_batches; k++) {
    if (overlap_ && k == micro_batches - 1)  // each layer's sum starts as its backward ends
      model_.set_layer_grads_hook([&](int l) {
        comm.start_all_reduce(grads + layer_grads_[l].begin, layer_grads_[l].size());
      });
    loss += model_.forward_backward(inputs + rows * k, targets + rows * k, step_tokens, k > 0);
  }
  if (overlap_) {  // then what lies outside the layers (embedding, final LayerNorm)
    model_.set_layer_grads_hook(nullptr);
    const size_t first = layer_grads_.front().begin, last = layer_grads_.back().end;
    comm.start_all_reduce(grads, first);
    comm.start_all_reduce(grads + last, n - last);
    comm.finish_all_reduces();
  } else if (comm.size() > 1) {
    comm.reduce_scatter(grads, n);
    // Muon's owners read their matrices' whole gradients, and every rank keeps Muon's momentum
    // whole: the sums go to every rank even under ZeRO-1.
    if (!zero1_ || settings_.muon) comm.all_gather(grads, n);
  }
  r.loss = comm.sum(loss);
  // The norm's square as the sum of the ranks' shards in rank order, whether or not this rank
  // holds the other shards, so that ZeRO-1 and plain data parallelism clip alike.
  double squares = 0;
  if (zero1_) {
    squares = comm.sum(be.sum_of_squares(grads + owned_.begin, owned_.size()));
  } else {
    for (int k = 0; k < comm.size(); k++) {
      const ShardRange s = comm.shard(n, k);
      const double part = be.sum_of_squares(grads + s.begin, s.size());
      squares = k == 0 ? part : squares + part;
    }
  }
  r.grad_norm = std::sqrt(squares);
  r.finite = std::isfinite(r.loss) && std::isfinite(r.grad_norm);
  // Every rank sees the same loss and norm, so all stop or skip alike.
  if (filter_) {
    r.skipped = filter_->judge(r.loss, r.grad_norm);
    if (!r.skipped.empty()) return r;
    filter_->applied(r.loss, r.grad_norm);
  } else if (!r.finite) {
    return r;
  }

  ops::AdamWSettings adam{lr, settings_.beta1, settings_.beta2, settings_.eps, 0.0, 1.0, step};
  if (settings_.grad_clip > 0 && r.grad_norm > settings_.grad_clip)
    adam.grad_scale = settings_.grad_clip / r.grad_norm;
  for (const TensorInfo& t : arena.layout) {
    if (settings_.muon && is_hidden_matrix(t.name)) continue;  // Muon's (below)
    const size_t begin = std::max(t.offset, owned_.begin);
    const size_t end = std::min(t.offset + t.numel, owned_.end);
    if (begin >= end) continue;
    adam.weight_decay = t.decay ? settings_.weight_decay : 0.0;  // 2-D matrices only
    const size_t moment = begin - arena.moments_begin;
    be.adamw_update(arena.params.data() + begin, grads + begin, arena.adam_m.data() + moment,
                    arena.adam_v.data() + moment, end - begin, adam);
  }
  if (zero1_) comm.all_gather(arena.params.data(), n);
  if (settings_.muon) muon_update(lr, adam.grad_scale);
  be.weights_changed(arena.params.data(), arena.params.size());
  return r;
}

// Muon (docs/SPEC.md §11) on every hidden matrix: each rank moves the momentum of all of them (an
// elementwise step: the same bits on every rank, so every rank holds it whole for checkpoints),
// the matrix's owner orthogonalises it and updates it, and sends it to the other ranks.
void TrainStep::muon_update(double lr, double grad_scale) {
  ParamArena<float>& arena = model_.params();
  Backend<float>& be = model_.backend();
  const double eta =
      settings_.peak_lr > 0 ? settings_.muon_lr * lr / settings_.peak_lr : settings_.muon_lr;
  ops::MuonSettings s;
  s.momentum = settings_.muon_momentum, s.grad_scale = grad_scale;
  float* scratch = muon_scratch_.data();
  for (const MuonMatrix& m : muon_matrices_)  // the others' momentum (their u is not needed here)
    if (m.owner != comm_->rank())
      be.muon_momentum(arena.muon_m.data() + m.offset, scratch, arena.grads.data() + m.offset,
                       (size_t)m.rows * m.cols, s);
  for (const std::vector<size_t>& batch : muon_batches_) {
    const MuonMatrix& first = muon_matrices_[batch[0]];
    ops::NewtonSchulzArgs<float> ns;
    ns.rows = first.rows, ns.cols = first.cols, ns.count = (int)batch.size();
    ns.x = scratch, ns.next = ns.x + kMuonBatch * muon_part_;
    ns.gram = ns.next + kMuonBatch * muon_part_;
    ns.gram2 = ns.gram + kMuonBatch * muon_square_, ns.poly = ns.gram2 + kMuonBatch * muon_square_;
    const size_t n = ns.size();
    for (size_t i = 0; i < batch.size(); i++) {
      const MuonMatrix& m = muon_matrices_[batch[i]];
      be.muon_momentum(arena.muon_m.data() + m.offset, ns.x + i * n, arena.grads.data() + m.offset,
                       n, s);
    }
    be.newton_schulz(ns);
    ops::MuonSettings update;
    update.keep = 1 - eta * settings_.weight_decay;
    update.step = eta * std::sqrt(std::max(1.0, (double)first.rows / first.cols));
    for (size_t i = 0; i < batch.size(); i++)
      be.muon_apply(arena.params.data() + muon_matrices_[batch[i]].offset, ns.x + i * n, n, update);
  }
  if (comm_->size() == 1) return;
  for (const MuonMatrix& m : muon_matrices_) {
    const size_t count = (size_t)m.rows * m.cols;
    float* values = arena.params.data() + m.offset;
    if (device_comm_)
      device_comm_->broadcast_device(values, count, m.owner);
    else
      comm_->broadcast(values, count * sizeof(float), m.owner);
  }
}

namespace {

// How far `value` lies above the mean of `window`, in standard deviations (0 when they do not
// vary).
double z_score(const std::deque<double>& window, double value) {
  double mean = 0;
  for (double x : window) mean += x;
  mean /= (double)window.size();
  double var = 0;
  for (double x : window) var += (x - mean) * (x - mean);
  const double sd = std::sqrt(var / (double)window.size());
  return sd > 0 ? (value - mean) / sd : 0;
}

}  // namespace

std::string BadStepFilter::judge(double loss, double grad_norm) const {
  if (!std::isfinite(loss)) return fmt::format("loss is {}", std::isnan(loss) ? "NaN" : "infinite");
  if (!std::isfinite(grad_norm))
    return fmt::format("gradient norm is {}", std::isnan(grad_norm) ? "NaN" : "infinite");
  if (losses_.size() < kMinHistory) return "";
  const double z_loss = z_score(losses_, loss), z_norm = z_score(norms_, grad_norm);
  if (z_loss > kZLimit)
    return fmt::format("loss {:.4g} is {:.1f} sd above the last {} steps'", loss, z_loss,
                       losses_.size());
  if (z_norm > kZLimit)
    return fmt::format("gradient norm {:.4g} is {:.1f} sd above the last {} steps'", grad_norm,
                       z_norm, norms_.size());
  return "";
}

void BadStepFilter::applied(double loss, double grad_norm) {
  losses_.push_back(loss);
  norms_.push_back(grad_norm);
  if (losses_.size() > kWindow) losses_.pop_front(), norms_.pop_front();
}

nlohmann::json BadStepFilter::to_json() const {
  return {{"losses", losses_}, {"grad_norms", norms_}};
}

void BadStepFilter::from_json(const nlohmann::json& j) {
  try {
    const auto losses = j.at("losses").get<std::vector<double>>();
    const auto norms = j.at("grad_norms").get<std::vector<double>>();
    if (losses.size() != norms.size() || losses.size() > kWindow)
      fail("{} losses and {} gradient norms (at most {} each, as many of one as of the other)",
           losses.size(), norms.size(), kWindow);
    losses_.assign(losses.begin(), losses.end());
    norms_.assign(norms.begin(), norms.end());
  } catch (const nlohmann::json::exception& e) {
    fail("{}", e.what());
  }
}

}  // namespace xsa
