// The one grammar of a model's attention (model/attention.h), used by --attn, compare's
// --variants and config files: a table of specs and the per-layer attention each must give,
// written out here by hand; the printed form reads back to the same; each refusal is one line
// naming the option and what is wrong.
#include <gtest/gtest.h>

#include "xsa/model/model_config.h"
#include "xsa/research/compare.h"
#include "xsa/util/error.h"

namespace xsa {
namespace {

// One layer written as kind letter (s sa, x xsa, g xsa-gated, o xsa-gated-one) and option
// letters (k sink, G gated-attn, V value-residual, N no-self, Q qk-norm, E value-embed), layers
// separated by
// spaces.
std::string layers_code(const AttentionLayers& layers, int n_layer) {
  std::string s;
  for (int l = 0; l < n_layer; l++) {
    const LayerAttention& a = layers[l];
    if (l) s += ' ';
    s += "sxgo"[(int)a.kind];
    if (a.sink) s += 'k';
    if (a.output_gate) s += 'G';
    if (a.value_residual) s += 'V';
    if (a.no_self) s += 'N';
    if (a.qk_norm) s += 'Q';
    if (a.value_embed) s += 'E';
  }
  return s;
}

struct Case {
  const char* spec;
  const char* layers;   // layers_code of the 4 layers
  const char* printed;  // attention_string
};

TEST(AttentionGrammar, EverySpecGivesItsLayersAndPrintsBack) {
  const Case cases[] = {
      {"sa", "s s s s", "sa"},
      {"xsa", "x x x x", "xsa"},
      {"xsa-gated-one", "o o o o", "xsa-gated-one"},
      // options in any order, printed in the table's
      {"xsa+sink+no-self", "xkN xkN xkN xkN", "xsa+sink+no-self"},
      {"xsa+no-self+sink", "xkN xkN xkN xkN", "xsa+sink+no-self"},
      {"xsa+value-residual+gated-attn", "xGV xGV xGV xGV", "xsa+gated-attn+value-residual"},
      // a rival alone is on SA
      {"gated-attn", "sG sG sG sG", "sa+gated-attn"},
      {"no-self+gated-attn", "sGN sGN sGN sGN", "sa+gated-attn+no-self"},
      // layer selections, their options on every layer
      {"xsa-last2", "s s x x", "sa,sa,xsa,xsa"},
      {"xsa-first1+sink", "xk sk sk sk", "xsa+sink,sa+sink,sa+sink,sa+sink"},
      {"xsa-layers-0.3+no-self", "xN sN sN xN", "xsa+no-self,sa+no-self,sa+no-self,xsa+no-self"},
      // one item per layer, each with its own options
      {"sa,xsa,sa,xsa+gated-attn", "s x s xG", "sa,xsa,sa,xsa+gated-attn"},
      {"value-residual,sa,xsa,no-self", "sV s x sN", "sa+value-residual,sa,xsa,sa+no-self"},
      {"xsa,xsa,xsa,xsa", "x x x x", "xsa"},
      {"sa+sink,xsa-gated+no-self+value-residual,sa,sa", "sk gVN s s",
       "sa+sink,xsa-gated+value-residual+no-self,sa,sa"},
      // QK-norm, an option of any layer (not a rival, so not alone)
      {"xsa+qk-norm", "xQ xQ xQ xQ", "xsa+qk-norm"},
      {"xsa+qk-norm+sink+no-self", "xkNQ xkNQ xkNQ xkNQ", "xsa+sink+no-self+qk-norm"},
      {"sa,xsa+qk-norm,sa+qk-norm,xsa", "s xQ sQ x", "sa,xsa+qk-norm,sa+qk-norm,xsa"},
      {"xsa-last1+qk-norm", "sQ sQ sQ xQ", "sa+qk-norm,sa+qk-norm,sa+qk-norm,xsa+qk-norm"},
      {"xsa+value-embed+qk-norm", "xQE xQE xQE xQE", "xsa+qk-norm+value-embed"},
      {"sa,xsa+value-embed,sa,sa", "s xE s s", "sa,xsa+value-embed,sa,sa"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec);
    const AttentionLayers layers = parse_attention(c.spec, 4, "--attn");
    EXPECT_EQ(layers_code(layers, 4), c.layers);
    EXPECT_EQ(attention_string(layers, 4), c.printed);
    const AttentionLayers again = parse_attention(attention_string(layers, 4), 4, "--attn");
    for (int l = 0; l < 4; l++) EXPECT_EQ(again[l], layers[l]) << l;
    // compare's variants read the same grammar (one item each)
    if (std::string(c.spec).find(',') == std::string::npos) {
      const Variant v = parse_variant(c.spec, 4);
      for (int l = 0; l < 4; l++) EXPECT_EQ(v.attention[l], layers[l]) << l;
    }
  }
}

// A single item fills every entry, so the layer count may be set after it (config files, --attn
// before --layers); a list fills its layers.
TEST(AttentionGrammar, OneItemIsEveryLayer) {
  const AttentionLayers layers = parse_attention("xsa+no-self", 2, "--attn");
  EXPECT_EQ(layers_code(layers, 1), "xN");
  for (int l = 1; l < kMaxLayers; l++) EXPECT_EQ(layers[l], layers[0]) << l;
  ModelConfig cfg;
  cfg.n_layer = 3;
  set_attention(cfg, "gated-attn");
  EXPECT_TRUE(has_rivals(cfg));
  EXPECT_EQ(attention_string(cfg), "sa+gated-attn");
  set_attention(cfg, "sa+sink,xsa,sa");
  EXPECT_FALSE(has_rivals(cfg));
  EXPECT_EQ(options_on_any_layer(cfg.attention, 3).sink, true);
}

// --qk-norm: +qk-norm on each item of --attn or --variants, before a precision, once.
TEST(AttentionGrammar, AnOptionOnEveryItem) {
  EXPECT_EQ(with_option_on_every_item("xsa", "qk-norm"), "xsa+qk-norm");
  EXPECT_EQ(with_option_on_every_item("sa,xsa+sink", "qk-norm"), "sa+qk-norm,xsa+sink+qk-norm");
  EXPECT_EQ(with_option_on_every_item("xsa@bf16", "qk-norm"), "xsa+qk-norm@bf16");
  EXPECT_EQ(with_option_on_every_item("xsa+qk-norm,sa", "qk-norm"), "xsa+qk-norm,sa+qk-norm");
  EXPECT_EQ(with_option_on_every_item("xsa-last2", "qk-norm"), "xsa-last2+qk-norm");
  const AttentionLayers layers =
      parse_attention(with_option_on_every_item("xsa-last2", "qk-norm"), 4, "--attn");
  EXPECT_EQ(layers_code(layers, 4), "sQ sQ xQ xQ");
}

TEST(AttentionGrammar, RefusalsAreOneLineNamingTheOptionAndTheFault) {
  const std::pair<const char*, const char*> bad[] = {
      {"xsa+gated", "'+gated' is not an option"},
      {"xsa+sink+sink", "sink twice"},
      {"gated-attn+gated-attn", "gated-attn twice"},
      {"sa,xsa", "lists 2 layers but the model has 4"},
      {"sa,xsa-last1,sa,sa", "chooses layers itself"},
      {"xsa-last5", "layer count between 1 and 4"},
      {"xsa-last0", "layer count between 1 and 4"},
      {"xsa-layers-1.x", "'x' is not a layer index"},
      {"xsa-layers-4", "'4' is not a layer index"},
      {"sink", "--attn sink is not known"},
      {"", "is not known"},
      {"sa+", "'+' is not an option"},
      {"sa,,sa,sa", "is not known"},
      {"qk-norm", "--attn qk-norm is not known"},
      {"xsa+qk-norm+qk-norm", "qk-norm twice"},
  };
  for (const auto& [spec, why] : bad) {
    SCOPED_TRACE(spec);
    try {
      parse_attention(spec, 4, "--attn");
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("--attn"), std::string::npos) << what;
      EXPECT_NE(what.find(why), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
  // compare names its own option, and a precision after @ is compare's alone
  try {
    parse_variant("xsa+gated@bf16", 4);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--variants"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace xsa
