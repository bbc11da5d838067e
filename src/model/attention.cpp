#include "xsa/model/attention.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "xsa/util/error.h"
#include "xsa/util/parse.h"

namespace xsa {

std::optional<AttnKind> attention_kind_named(const std::string& name) {
  for (const AttentionKindRow& row : kAttentionKinds)
    if (name == row.name) return row.kind;
  return std::nullopt;
}

std::string attention_kind_names() {
  std::string names;
  for (const AttentionKindRow& row : kAttentionKinds)
    names += (names.empty() ? "" : ", ") + std::string(row.name);
  return names;
}

std::string attention_grammar() {
  std::string alone, options;
  for (const AttentionOption& o : kAttentionOptions) {
    if (o.rival) alone += std::string(", ") + o.name;
    options += (options.empty() ? "+" : ", +") + std::string(o.name);
  }
  return attention_kind_names() + ", xsa-lastN, xsa-firstN, xsa-layers-0.2.5" + alone + "; then " +
         options + " in any order";
}

namespace {

// A whole number in [lo, hi] spelled with digits only, else -1.
int whole_number(const std::string& s, int lo, int hi) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  const int n = std::stoi(s);
  return n >= lo && n <= hi ? n : -1;
}

struct Context {
  const std::string& spec;
  const std::string& what;
  int n_layer;
};

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// Whether the base chooses its layers itself: xsa-lastN, xsa-firstN, xsa-layers-I.J.
bool chooses_layers(const std::string& base) {
  return starts_with(base, "xsa-last") || starts_with(base, "xsa-first") ||
         starts_with(base, "xsa-layers-");
}

// XSA on the layers such a base names, SA on the others.
void layer_selection(const std::string& base, const Context& c, AttentionLayers& layers) {
  auto starts = [&](const char* prefix) { return starts_with(base, prefix); };
  auto count = [&](const char* prefix) {
    const int n = whole_number(base.substr(std::char_traits<char>::length(prefix)), 1, c.n_layer);
    if (n < 0)
      fail("{} {}: '{}' needs a layer count between 1 and {} (--layers)", c.what, c.spec, base,
           c.n_layer);
    return n;
  };
  if (starts("xsa-last")) {
    for (int l = c.n_layer - count("xsa-last"); l < c.n_layer; l++) layers[l].kind = AttnKind::xsa;
  } else if (starts("xsa-first")) {
    for (int l = 0, n = count("xsa-first"); l < n; l++) layers[l].kind = AttnKind::xsa;
  } else if (starts("xsa-layers-")) {
    for (const std::string& item : split(base.substr(11), '.')) {
      const int l = whole_number(item, 0, c.n_layer - 1);
      if (l < 0)
        fail("{} {}: '{}' is not a layer index between 0 and {}", c.what, c.spec, item,
             c.n_layer - 1);
      layers[l].kind = AttnKind::xsa;
    }
  }
}

// One item: the base, then its options; `selection` takes xsa-lastN and the like (alone only).
void parse_item(const std::string& item, const Context& c, LayerAttention& layer,
                AttentionLayers* selection) {
  const std::vector<std::string> words = split(item, '+');
  const std::string& base = words[0];
  auto option_named = [](const std::string& word) -> const AttentionOption* {
    for (const AttentionOption& o : kAttentionOptions)
      if (word == o.name) return &o;
    return nullptr;
  };
  if (const auto kind = attention_kind_named(base)) {
    layer.kind = *kind;
  } else if (const AttentionOption* o = option_named(base); o && o->rival) {
    layer.*(o->flag) = true;  // a rival alone: on SA
  } else if (chooses_layers(base)) {
    if (!selection)
      fail("{} {}: '{}' chooses layers itself, so it cannot be one item of a per-layer list",
           c.what, c.spec, base);
    layer_selection(base, c, *selection);
  } else {
    if (base == c.spec) fail("{} {} is not known ({})", c.what, c.spec, attention_grammar());
    fail("{} {}: '{}' is not known ({})", c.what, c.spec, base.empty() ? item : base,
         attention_grammar());
  }
  for (size_t i = 1; i < words.size(); i++) {
    const AttentionOption* o = option_named(words[i]);
    if (!o)
      fail("{} {}: '+{}' is not an option ({})", c.what, c.spec, words[i], attention_grammar());
    if (layer.*(o->flag)) fail("{} {}: '{}' has {} twice", c.what, c.spec, item, o->name);
    layer.*(o->flag) = true;
  }
}

std::string item_string(const LayerAttention& layer) {
  std::string s = to_string(layer.kind);
  for (const AttentionOption& o : kAttentionOptions)
    if (layer.*(o.flag)) s += std::string("+") + o.name;
  return s;
}

}  // namespace

std::string with_option_on_every_item(const std::string& spec, const std::string& option) {
  std::string out;
  for (const std::string& item : split(spec, ',')) {
    const size_t at = std::min(item.find('@'), item.size());
    std::string body = item.substr(0, at);
    const std::vector<std::string> words = split(body, '+');
    if (std::find(words.begin() + 1, words.end(), option) == words.end()) body += "+" + option;
    out += (out.empty() ? "" : ",") + body + item.substr(at);
  }
  return out;
}

AttentionLayers parse_attention(const std::string& spec, int n_layer, const std::string& what) {
  // Every layer's attention lives in a table of kMaxLayers: a model of more is refused here,
  // before any layer index is used (the grammar may be read before --layers is checked).
  if (n_layer < 1 || n_layer > kMaxLayers)
    fail("{} {}: --layers {} must be between 1 and {}", what, spec, n_layer, kMaxLayers);
  const Context c{spec, what, n_layer};
  AttentionLayers layers{};
  const std::vector<std::string> items = split(spec, ',');
  if (items.size() == 1) {
    // The options of a layer selection go on every layer, as those of a single kind.
    LayerAttention options;
    parse_item(spec, c, options, &layers);
    for (LayerAttention& layer : layers) {
      const AttnKind kind = options.kind != AttnKind::sa ? options.kind : layer.kind;
      layer = options, layer.kind = kind;
    }
    return layers;
  }
  if ((int)items.size() != n_layer)
    fail("{} {}: lists {} layers but the model has {} (--layers)", what, spec, items.size(),
         n_layer);
  for (int l = 0; l < n_layer; l++) parse_item(items[l], c, layers[l], nullptr);
  return layers;
}

std::string attention_string(const AttentionLayers& layers, int n_layer) {
  bool uniform = true;
  for (int l = 1; l < n_layer; l++) uniform &= layers[l] == layers[0];
  if (uniform) return item_string(layers[0]);
  std::string s;
  for (int l = 0; l < n_layer; l++) {
    if (l) s += ',';
    s += item_string(layers[l]);
  }
  return s;
}

std::string rivals_string(const LayerAttention& options) {
  std::string s;
  for (const AttentionOption& o : kAttentionOptions)
    if (o.rival && options.*(o.flag)) {
      if (!s.empty()) s += '+';
      s += o.name;
    }
  return s;
}

std::string with_whole_model_options(std::string spec, const LayerAttention& options) {
  for (const AttentionOption& o : kAttentionOptions)
    if (o.whole_model && options.*o.flag) spec = with_option_on_every_item(spec, o.name);
  return spec;
}

std::string whole_model_options_string(const LayerAttention& options) {
  std::string s;
  for (const AttentionOption& o : kAttentionOptions)
    if (o.whole_model && options.*(o.flag)) s += (s.empty() ? "" : ", ") + std::string(o.title);
  return s;
}

LayerAttention options_on_any_layer(const AttentionLayers& layers, int n_layer) {
  LayerAttention any;
  for (int l = 0; l < n_layer; l++)
    for (const AttentionOption& o : kAttentionOptions) any.*(o.flag) |= layers[l].*(o.flag);
  return any;
}

bool any_layer_mixes_values(const AttentionLayers& layers, int n_layer) {
  for (int l = 1; l < n_layer; l++)
    if (layers[l].value_residual) return true;
  return false;
}

}  // namespace xsa
