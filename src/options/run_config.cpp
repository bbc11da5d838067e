#include "xsa/options/run_config.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "xsa/backend/device.h"
#include "xsa/util/error.h"

namespace xsa {

void RunConfig::validate() const {
  if (data.empty()) fail("--data is required: a text file to train on");
  if (batch <= 0) fail("--batch {} must be positive", batch);
  if (total_batch_tokens < 0)
    fail("--total-batch-tokens {} must be positive (0: --batch × --seq-len × processes)",
         total_batch_tokens);
  validate_device(device);
  validate_comm_choice(comm, device);
  if (overlap && zero == 1) fail("--overlap and --zero 1 do not combine (yet): choose one");
  if (zero != 0 && zero != 1)
    fail("--zero {} must be 0 or 1 (ZeRO-1: sharded AdamW moments)", zero);
  if (steps <= 0) fail("--steps {} must be positive", steps);
  if (!(lr > 0) || !std::isfinite(lr)) fail("--lr {} must be a positive number", lr);
  if (!(min_lr_fraction >= 0 && min_lr_fraction <= 1))
    fail("--min-lr-fraction {} must be in [0, 1]", min_lr_fraction);
  if (warmup < -1 || warmup > steps)
    fail("--warmup {} must be between 0 and --steps {}", warmup, steps);
  if (!(weight_decay >= 0)) fail("--weight-decay {} must be non-negative", weight_decay);
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    fail("--beta1/--beta2 must be in [0, 1)");
  if (!(adam_eps > 0)) fail("--adam-eps {} must be positive", adam_eps);
  if (!(grad_clip >= 0)) fail("--grad-clip {} must be non-negative", grad_clip);
  if (optimizer != "adamw" && optimizer != "muon")
    fail("--optimizer {} is not known (adamw, muon)", optimizer);
  if (!(muon_lr > 0) || !std::isfinite(muon_lr))
    fail("--muon-lr {} must be a positive number", muon_lr);
  if (!(muon_momentum >= 0 && muon_momentum < 1))
    fail("--muon-momentum {} must be in [0, 1)", muon_momentum);
  if (threads < 0) fail("--threads {} must be 0 (every core) or positive", threads);
  if (ckpt_every < 0) fail("--ckpt-every {} must be non-negative", ckpt_every);
  if (val_every < 0) fail("--val-every {} must be non-negative", val_every);
  if (val_batches < 0) fail("--val-batches {} must be non-negative", val_batches);
  if (log_every <= 0) fail("--log-every {} must be positive", log_every);
}

int RunConfig::accumulation_steps(int T, int world) const {
  const int64_t total = step_tokens(T, world), per_pass = (int64_t)batch * T * world;
  if (total % per_pass == 0) return (int)(total / per_pass);
  // Name what would divide: the largest --batch that does, and the nearest totals.
  int fits = 0;
  for (int b = batch; b >= 1 && fits == 0; b--)
    if (total % ((int64_t)b * T * world) == 0) fits = b;
  const int64_t below = total / per_pass * per_pass, above = below + per_pass;
  std::string hint = fits > 0 ? fmt::format("--batch {}", fits) : std::string();
  if (below > 0)
    hint += fmt::format("{}--total-batch-tokens {}", hint.empty() ? "" : " or ", below);
  hint += fmt::format("{}--total-batch-tokens {}", hint.empty() ? "" : " or ", above);
  fail(
      "--total-batch-tokens {} is not a multiple of {} process{} × --batch {} × --seq-len {} = {} "
      "tokens per pass; use {}",
      total, world, world == 1 ? "" : "es", batch, T, per_pass, hint);
}

int RunConfig::batch_for_step_tokens(int64_t tokens, int T, int world, int max_batch) {
  const int64_t per_row = (int64_t)T * world;
  if (tokens <= 0) fail("--tokens-per-step {} must be positive", tokens);
  if (tokens % per_row != 0)
    fail(
        "--tokens-per-step {} is not a multiple of --seq-len {} × {} process{} = {}: the nearest "
        "are {} and {}",
        tokens, T, world, world == 1 ? "" : "es", per_row, tokens / per_row * per_row,
        (tokens / per_row + 1) * per_row);
  const int64_t rows = tokens / per_row;
  for (int64_t b = std::min<int64_t>(rows, max_batch); b >= 1; b--)
    if (rows % b == 0) return (int)b;
  return 1;
}

namespace {

template <typename Field>
nlohmann::json option_json(const Field& field) {
  if constexpr (std::is_same_v<Field, Precision>)
    return to_string(field);
  else
    return field;
}

}  // namespace

nlohmann::json run_config_to_json(const RunConfig& r, unsigned roles) {
  static const RunConfig defaults;
  nlohmann::json j = nlohmann::json::object(), unset = nlohmann::json::object();
  for_each_run_option(defaults, [&](const RunOption& o, const auto& field) {
    if (o.roles & kOmittedAtDefault) unset[o.key] = option_json(field);
  });
  for_each_run_option(r, [&](const RunOption& o, const auto& field) {
    if ((o.roles & roles) != roles) return;
    const nlohmann::json value = option_json(field);
    if ((o.roles & kOmittedAtDefault) && unset[o.key] == value) return;
    j[o.key] = value;
  });
  if (j.contains("warmup")) j["warmup"] = r.warmup_steps();
  return j;
}

void run_config_update_from_json(RunConfig& r, const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) fail("{}: run settings are not a JSON object", source);
  for_each_run_option(r, [&](const RunOption& o, auto& field) {
    if (!(o.roles & kSaved) || !j.contains(o.key)) return;
    using T = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<T, Precision>) {
      const nlohmann::json& v = j[o.key];
      const auto precision = v.is_string() ? precision_named(v.get<std::string>()) : std::nullopt;
      if (!precision)
        fail("{}: run setting {} must be {}, not {}", source, o.key, kPrecisionChoices, v.dump());
      field = *precision;
    } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // get<T>() would cast a float (1e40, 2.5) or an integer past T's range: undefined
      // behaviour, or silently another value.
      const nlohmann::json& v = j[o.key];
      const bool fits = v.is_number_unsigned()
                            ? v.get<uint64_t>() <= (uint64_t)std::numeric_limits<T>::max()
                            : v.is_number_integer() &&
                                  v.get<int64_t>() >= (int64_t)std::numeric_limits<T>::min() &&
                                  (std::is_unsigned_v<T> ||
                                   v.get<int64_t>() <= (int64_t)std::numeric_limits<T>::max());
      if (!fits)
        fail("{}: run setting {} must be an integer from {} to {}, not {}", source, o.key,
             std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), v.dump());
    }
    if constexpr (!std::is_same_v<T, Precision>) {
      try {
        field = j[o.key].get<T>();
      } catch (const nlohmann::json::exception& e) {
        fail("{}: run setting {} has the wrong type ({})", source, o.key, e.what());
      }
    }
  });
}

}  // namespace xsa
