// Task files (src/eval/tasks.*): JSON lines or one JSON array, read as every task format (the
// paper's eight, HellaSwag and the generic mc) and with the format told by the first record;
// accepted files are then tokenized for scoring (byte tokenizer, a short context).
#include "fuzz_common.h"
#include "xsa/eval/evaluate.h"
#include "xsa/eval/tasks.h"
#include "xsa/tokenizer/byte_tokenizer.h"

namespace {

void check(xsa::TaskFile& file) {
  using namespace xsa;
  XSA_FUZZ_EXPECT(!file.examples.empty());
  for (const TaskExample& ex : file.examples) {
    XSA_FUZZ_EXPECT(!ex.choices.empty());
    XSA_FUZZ_EXPECT(ex.label >= 0 && ex.label < (int)ex.choices.size());
    XSA_FUZZ_EXPECT(ex.choice_contexts.empty() || ex.choice_contexts.size() == ex.choices.size());
  }
  static const ByteTokenizer tok;
  ModelConfig cfg;
  cfg.n_layer = 1, cfg.n_head = 1, cfg.n_embd = 8, cfg.seq_len = 16;
  fuzz::accepts([&] { (void)tokenize_task(cfg, tok, file, /*skip_bad_lines=*/true); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xsa;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (bool skip : {false, true}) {
    fuzz::accepts([&] {
      TaskFile file = task_file_from_text(text, "fuzz.jsonl", skip);
      check(file);
    });
    for (TaskKind kind : {TaskKind::arc_easy, TaskKind::arc_challenge, TaskKind::boolq,
                          TaskKind::hellaswag, TaskKind::lambada, TaskKind::openbookqa,
                          TaskKind::piqa, TaskKind::social_iqa, TaskKind::winogrande, TaskKind::mc})
      fuzz::accepts([&] {
        TaskFile file = task_file_from_text(kind, text, "fuzz.jsonl", skip, /*limit=*/skip ? 2 : 0);
        check(file);
      });
  }
  (void)hellaswag_preprocess(text);
  XSA_FUZZ_EXPECT(utf8_length(text) <= (int)size);
  return 0;
}
