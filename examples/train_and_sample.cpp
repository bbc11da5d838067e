// Trains a small XSA model on a text file with the xsa library, reports its validation loss, then
// samples from it through the key/value cache. Usage: train_and_sample TEXT_FILE [STEPS]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "xsa/xsa.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TEXT_FILE [STEPS]\n", argv[0]);
    return 2;
  }
  const int steps = argc > 2 ? std::atoi(argv[2]) : 200, B = 8, T = 64;
  try {
    xsa::set_thread_count(0);  // every core
    // Bytes as tokens; the last 10 % of the file is held out for validation.
    xsa::Dataset data = xsa::open_dataset(argv[1], xsa::TokenizerKind::byte, 0.1, B, T);

    xsa::ModelConfig cfg;  // byte vocabulary (256) by default
    cfg.n_layer = 2, cfg.n_head = 4, cfg.n_embd = 64, cfg.seq_len = T;
    xsa::set_attention(cfg, "xsa");  // exclusive self attention in every layer
    xsa::Gpt<float> model(cfg, B, T);
    model.params().init(cfg, /*seed=*/1);

    xsa::TrainStep trainer(model, xsa::OptimizerSettings{});  // AdamW, clipping at norm 1
    const xsa::LrSchedule schedule{3e-3, 0.1, steps / 20, steps};
    xsa::BatchLoader loader(data.train, B, T, /*shuffle=*/true, /*seed=*/1);
    std::vector<int32_t> inputs(B * T), targets(B * T);
    for (int s = 0; s < steps; s++) {
      loader.next(inputs.data(), targets.data());
      const xsa::StepResult r = trainer.run(inputs.data(), targets.data(), schedule.at(s), s + 1);
      if (!r.finite) {
        std::fprintf(stderr, "the loss diverged at step %d\n", s + 1);
        return 1;
      }
      if ((s + 1) % 50 == 0 || s + 1 == steps) std::printf("step %d: loss %.4f\n", s + 1, r.loss);
    }
    const int val_batches = xsa::val_batch_count(data.val, B, T, 4);
    std::printf("validation loss %.4f\n", xsa::evaluate_loss(model, data.val, val_batches));

    // Generation: the decoder borrows the trained weights and keeps a key/value cache.
    auto tokenizer = xsa::make_tokenizer(xsa::TokenizerKind::byte);
    xsa::Decoder<float> decoder(cfg, model.params().w, /*capacity=*/T);
    xsa::Sampler sampler({/*temperature=*/0.8, /*top_k=*/40, /*top_p=*/0.95, /*seed=*/1});
    const std::string prompt = "The ";
    std::printf("%s", prompt.c_str());
    xsa::generate(decoder, tokenizer->encode(prompt), 120, sampler, /*stop_token=*/-1,
                  [&](int32_t id) { std::printf("%s", tokenizer->decode(&id, 1).c_str()); });
    std::printf("\n");
  } catch (const xsa::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
