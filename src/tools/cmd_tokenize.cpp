// xsa tokenizer encode / decode: text to ids and ids to text, to check a tokenizer by hand; and
// xsa tokenize, the short name of encode kept from before (--decode: decode).
#include <cstdio>
#include <iostream>
#include <iterator>

#include "xsa/tokenizer/tokenizer.h"
#include "xsa/tools/commands.h"
#include "xsa/util/error.h"

namespace xsa::cli {

namespace {

// One of the three: encode (decode false: --decode may ask), or decode (always).
void add_codec(CLI::App* cmd, bool decode_only) {
  struct Args {
    std::string tokenizer = "gpt2", vocab_dir;
    std::vector<std::string> words;
    bool decode = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--tokenizer", a->tokenizer,
                  "gpt2, byte or spm:FOLDER (a vocabulary of xsa tokenizer train)")
      ->capture_default_str();
  cmd->add_option("--vocab-dir", a->vocab_dir,
                  "Folder with GPT-2's encoder.json and vocab.bpe (default: data/gpt2)");
  if (decode_only)
    a->decode = true;
  else
    cmd->add_flag("--decode", a->decode,
                  "Read token ids and print their text (xsa tokenizer decode)");
  cmd->add_option("input", a->words,
                  decode_only ? "Token ids to decode"
                              : "Text to encode (read from standard input when absent), or ids "
                                "with --decode");
  cmd->callback([a] {
    const TokenizerChoice choice = parse_tokenizer_choice(a->tokenizer);
    auto tok = make_tokenizer(choice.kind,
                              choice.kind == TokenizerKind::spm ? choice.spm_dir : a->vocab_dir);
    if (a->decode) {
      std::vector<int32_t> ids;
      for (const std::string& w : a->words) {
        size_t used = 0;
        long long v = 0;
        try {
          v = std::stoll(w, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used != w.size() || v < 0 || v >= tok->vocab_size())
          fail("--decode: '{}' is not a token id of the {} vocabulary (0..{})", w, a->tokenizer,
               tok->vocab_size() - 1);
        ids.push_back((int32_t)v);
      }
      std::string text = tok->decode(ids);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::printf("\n");
      return;
    }
    std::string text;
    if (a->words.empty()) {
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    } else {
      for (size_t i = 0; i < a->words.size(); i++) text += (i ? " " : "") + a->words[i];
    }
    std::vector<int32_t> ids = tok->encode(text);
    for (size_t i = 0; i < ids.size(); i++) std::printf(i ? " %d" : "%d", ids[i]);
    std::printf("\n");
  });
}

}  // namespace

void add_tokenize_command(CLI::App& root) {
  CLI::App* group = root.get_subcommand("tokenizer");
  add_codec(group->add_subcommand("encode", "Print the token ids of a text"), false);
  add_codec(group->add_subcommand("decode", "Print the text of token ids"), true);
  add_codec(root.add_subcommand("tokenize", "The same as xsa tokenizer encode (--decode: decode)"),
            false);
}

}  // namespace xsa::cli
