#include "xsa/io/checkpoint.h"

#include <algorithm>

#include "xsa/io/safetensors.h"
#include "xsa/util/error.h"
#include "xsa/util/files.h"
#include "xsa/util/fmt.h"

namespace xsa {
namespace {

constexpr const char* kPrefix = "ckpt_";

std::string checkpoint_name(int64_t step) {
  return fmt::format("{}{:06d}", kPrefix, step);
}

bool is_checkpoint_name(const std::string& name) {
  if (name.rfind(kPrefix, 0) != 0 || name.size() <= 5) return false;
  return std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

nlohmann::json parse_json_file(const fs::path& path) {
  std::string text = read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON ({})", path.string(), e.what());
  }
}

// Which tensors a file of optimizer state holds under a suffix: AdamW's every tensor but, with
// Muon, the hidden matrices, whose state is Muon's alone.
enum class Holder { every, adamw, muon };
bool holds(Holder h, const TensorInfo& t) {
  return h == Holder::every || (h == Holder::muon) == is_hidden_matrix(t.name);
}

std::vector<TensorRef> tensor_refs(const std::vector<TensorInfo>& layout, const float* base,
                                   const std::string& suffix, Holder h = Holder::every) {
  std::vector<TensorRef> refs;
  for (const TensorInfo& t : layout)
    if (holds(h, t)) refs.push_back({t.name + suffix, t.shape, base + t.offset});
  return refs;
}

void read_tensors(const SafetensorsFile& file, const std::vector<TensorInfo>& layout, float* base,
                  const std::string& suffix, Holder h = Holder::every) {
  for (const TensorInfo& t : layout)
    if (holds(h, t)) file.read(t.name + suffix, t.shape, base + t.offset);
}

}  // namespace

fs::path save_checkpoint(const fs::path& run_dir, int64_t step, const ModelConfig& cfg,
                         const ParamArena<float>& arena, const nlohmann::json& trainer_state,
                         bool replace, const std::vector<fs::path>& extra_files) {
  XSA_CHECK(arena.adam_m.size() == arena.params.size(), "saving sharded moments");
  const HostView<float> params(arena.params), adam_m(arena.adam_m), adam_v(arena.adam_v),
      muon_m(arena.muon_m);
  return save_checkpoint(run_dir, step, cfg,
                         {arena.layout, params.data(), adam_m.data(), adam_v.data(),
                          arena.muon_m.size() ? muon_m.data() : nullptr},
                         trainer_state, replace, extra_files);
}

fs::path save_checkpoint(const fs::path& run_dir, int64_t step, const ModelConfig& cfg,
                         const CheckpointTensors& tensors, const nlohmann::json& trainer_state,
                         bool replace, const std::vector<fs::path>& extra_files) {
  const std::vector<TensorInfo>& layout = tensors.layout;
  const float *params = tensors.params, *adam_m = tensors.adam_m, *adam_v = tensors.adam_v;
  std::error_code ec;
  create_owned_folder(run_dir);
  const fs::path final_dir = run_dir / checkpoint_name(step);
  if (fs::exists(final_dir) && !replace)
    fail("{}: a checkpoint of this step already exists; not overwriting it", final_dir.string());
  const fs::path tmp_dir = run_dir / (".tmp_" + checkpoint_name(step));
  remove_owned(tmp_dir);
  fs::create_directory(tmp_dir, ec);
  if (ec) fail("{}: cannot create: {}", tmp_dir.string(), ec.message());

  try {
    nlohmann::json config_json = cfg;
    write_file_atomic(tmp_dir / "config.json", config_json.dump(2) + "\n");
    write_file_atomic(tmp_dir / "model.safetensors",
                      encode_safetensors(tensor_refs(layout, params, ""),
                                         {{"format", "pt"}, {"step", std::to_string(step)}}));
    if (adam_m) {
      const Holder adamw = tensors.muon_m ? Holder::adamw : Holder::every;
      std::vector<TensorRef> moments = tensor_refs(layout, adam_m, ".exp_avg", adamw);
      for (TensorRef& r : tensor_refs(layout, adam_v, ".exp_avg_sq", adamw)) moments.push_back(r);
      if (tensors.muon_m)
        for (TensorRef& r : tensor_refs(layout, tensors.muon_m, ".muon_momentum", Holder::muon))
          moments.push_back(r);
      write_file_atomic(tmp_dir / "optimizer.safetensors", encode_safetensors(moments));
    }
    if (!trainer_state.is_null())
      write_file_atomic(tmp_dir / "trainer.json", trainer_state.dump(2) + "\n");
    for (const fs::path& file : extra_files)
      write_file_atomic(tmp_dir / file.filename(), read_file(file));
  } catch (const Error& e) {  // a full disk or a size limit: the half-written folder goes
    fs::remove_all(tmp_dir, ec);
    fail("checkpoint {} not written: {}", final_dir.string(), e.what());
  }

  // Swap into place: an existing checkpoint of the same step (only when replace) moves aside
  // first and is deleted after the new one is in place.
  const fs::path old_dir = run_dir / (".old_" + checkpoint_name(step));
  if (fs::exists(fs::symlink_status(final_dir))) fs::rename(final_dir, old_dir);
  fs::rename(tmp_dir, final_dir, ec);
  if (ec) fail("{}: cannot move the checkpoint into place: {}", final_dir.string(), ec.message());
  sync_directory(run_dir);
  remove_owned(old_dir);
  return final_dir;
}

std::vector<fs::path> list_checkpoints(const fs::path& run_dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(run_dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(run_dir, ec))
    if (entry.is_directory() && is_checkpoint_name(entry.path().filename().string()))
      out.push_back(entry.path());
  std::sort(out.begin(), out.end());  // zero-padded names sort by step
  return out;
}

std::optional<fs::path> latest_checkpoint(const fs::path& run_dir) {
  auto all = list_checkpoints(run_dir);
  if (all.empty()) return std::nullopt;
  return all.back();
}

std::string tokenizer_folder(const fs::path& ckpt_dir, const ModelConfig& cfg,
                             const std::string& gpt2_vocab_dir) {
  return cfg.tokenizer == TokenizerKind::spm ? ckpt_dir.string() : gpt2_vocab_dir;
}

fs::path resolve_checkpoint(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail("{}: no such run or checkpoint folder", path.string());
  if (fs::exists(path / "config.json", ec) && fs::exists(path / "model.safetensors", ec))
    return path;
  if (auto latest = latest_checkpoint(path)) return *latest;
  fail("{}: holds no checkpoint (no ckpt_* folder with config.json and model.safetensors)",
       path.string());
}

ModelConfig load_checkpoint_config(const fs::path& ckpt_dir) {
  const fs::path path = ckpt_dir / "config.json";
  return model_config_from_json(parse_json_file(path), path.string());
}

void load_checkpoint_weights(const fs::path& ckpt_dir, ParamArena<float>& arena,
                             bool with_optimizer) {
  {
    HostView<float> params(arena.params, true);
    if (!with_optimizer) {
      load_checkpoint_tensors(ckpt_dir, {arena.layout, params.data()});
    } else {
      XSA_CHECK(arena.adam_m.size() == arena.params.size(), "loading into sharded moments");
      HostView<float> adam_m(arena.adam_m, true), adam_v(arena.adam_v, true),
          muon_m(arena.muon_m, true);
      load_checkpoint_tensors(ckpt_dir, {arena.layout, params.data(), adam_m.data(), adam_v.data(),
                                         arena.muon_m.size() ? muon_m.data() : nullptr});
    }
  }  // written back before the backend hears of it (a device backend copies on close)
  if (arena.params.backend())
    arena.params.backend()->weights_changed(arena.params.data(), arena.params.size());
}

void load_checkpoint_tensors(const fs::path& ckpt_dir, const CheckpointTarget& target) {
  const fs::path model_path = ckpt_dir / "model.safetensors";
  SafetensorsFile model(model_path.string(), read_file(model_path));
  read_tensors(model, target.layout, target.params, "");
  if (!target.adam_m) return;
  const fs::path opt_path = ckpt_dir / "optimizer.safetensors";
  SafetensorsFile opt(opt_path.string(), read_file(opt_path));
  const Holder adamw = target.muon_m ? Holder::adamw : Holder::every;
  read_tensors(opt, target.layout, target.adam_m, ".exp_avg", adamw);
  read_tensors(opt, target.layout, target.adam_v, ".exp_avg_sq", adamw);
  if (target.muon_m)
    read_tensors(opt, target.layout, target.muon_m, ".muon_momentum", Holder::muon);
}

nlohmann::json load_trainer_state(const fs::path& ckpt_dir) {
  const fs::path path = ckpt_dir / "trainer.json";
  nlohmann::json state = parse_json_file(path);
  // The fields readers take with a default (json::value) must at least have their type, or the
  // reader would throw an error that names no file.
  using Check = bool (nlohmann::json::*)() const noexcept;
  const std::pair<const char*, Check> fields[] = {
      {"/step", &nlohmann::json::is_number_integer},
      {"/tokens_seen", &nlohmann::json::is_number_integer},
      {"/world_size", &nlohmann::json::is_number_integer},
      {"/accumulation_steps", &nlohmann::json::is_number_integer},
      {"/elapsed_s", &nlohmann::json::is_number},
      {"/run", &nlohmann::json::is_object},
      {"/run/val_fraction", &nlohmann::json::is_number},
      {"/data", &nlohmann::json::is_object},
      {"/data/source", &nlohmann::json::is_string},
      {"/data/train_tokens", &nlohmann::json::is_number_integer}};
  if (!state.is_object()) fail("{}: not a JSON object", path.string());
  for (const auto& [where, is_right] : fields) {
    const nlohmann::json::json_pointer ptr(where);
    if (state.contains(ptr) && !(state.at(ptr).*is_right)())
      fail("{}: {} has the wrong type ({})", path.string(), std::string(where).substr(1),
           state.at(ptr).type_name());
  }
  return state;
}

ModelConfig init_from_config(const fs::path& ckpt_dir, const ModelConfig& requested) {
  const ModelConfig stored = load_checkpoint_config(ckpt_dir);
  ModelConfig cfg = stored;
  cfg.attention = requested.attention;
  cfg.seq_len = requested.seq_len;
  if (cfg.positions == Positions::learned && cfg.seq_len > stored.seq_len)
    fail("--seq-len {} is longer than the {} learned positions of --init-from {}", cfg.seq_len,
         stored.seq_len, ckpt_dir.string());
  return cfg;
}

InitialWeights::InitialWeights(const std::string& init_from, const fs::path& out, bool force)
    : path_((resolve_checkpoint(init_from) / "model.safetensors").string()),
      file_(path_, read_file(path_)) {
  if (force && path_is_inside(path_, out))
    fail(
        "--init-from {} lies inside --out {}, which --force would clear; copy it elsewhere or "
        "choose another --out",
        init_from, out.string());
}

std::vector<std::string> InitialWeights::check(const std::vector<TensorInfo>& layout) const {
  for (const std::string& name : file_.names()) {
    bool known = false;
    for (const TensorInfo& t : layout) known |= t.name == name;
    if (!known)
      fail(
          "{}: tensor '{}' has no place in the model being trained (its attention differs: a "
          "gate, sink or rival's tensor would be dropped)",
          path_, name);
  }
  std::vector<std::string> fresh;
  for (const TensorInfo& t : layout) {
    if (!file_.contains(t.name)) {
      if (t.name.find("xsa_gate") == std::string::npos &&
          t.name.find("attn.sink") == std::string::npos)
        fail("{}: tensor '{}' is missing", path_, t.name);
      fresh.push_back(t.name);
      continue;
    }
    const std::vector<int64_t>& stored = file_.shape(t.name);
    const bool positions = t.name == "transformer.wpe.weight";
    const bool fits = positions
                          ? stored.size() == 2 && stored[1] == t.shape[1] && stored[0] >= t.shape[0]
                          : stored == t.shape;
    if (!fits)
      fail("{}: tensor '{}' has shape {}, the model needs {}{}", path_, t.name,
           shape_string(stored), shape_string(t.shape), positions ? " (or more rows)" : "");
  }
  return fresh;
}

std::vector<std::string> InitialWeights::load(ParamArena<float>& arena) const {
  const std::vector<std::string> fresh = check(arena.layout);
  {
    HostView<float> params(arena.params, true);
    for (const TensorInfo& t : arena.layout) {
      if (!file_.contains(t.name)) continue;
      if (t.name == "transformer.wpe.weight") {  // the first rows of [T_stored ≥ T, C]
        const std::vector<int64_t>& stored = file_.shape(t.name);
        std::vector<float> all((size_t)stored[0] * stored[1]);
        file_.read(t.name, stored, all.data());
        std::copy(all.begin(), all.begin() + t.numel, params.data() + t.offset);
        continue;
      }
      file_.read(t.name, t.shape, params.data() + t.offset);
    }
  }  // written back before the backend hears of it
  if (arena.params.backend())
    arena.params.backend()->weights_changed(arena.params.data(), arena.params.size());
  return fresh;
}

}  // namespace xsa
