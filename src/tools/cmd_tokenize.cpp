// xsa tokenize: encode text to ids or decode ids to text, to check a tokenizer by hand.
#include <cstdio>
#include <iostream>
#include <iterator>

#include "xsa/tokenizer/tokenizer.h"
#include "xsa/tools/commands.h"
#include "xsa/util/error.h"

namespace xsa::cli {

void add_tokenize_command(CLI::App& root) {
  auto* cmd = root.add_subcommand("tokenize",
                                  "Print the token ids of a text, or (--decode) the text of ids");
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
  cmd->add_flag("--decode", a->decode, "Read token ids and print their text");
  cmd->add_option("input", a->words,
                  "Text to encode (read from standard input when absent), or ids with --decode");
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

}  // namespace xsa::cli
