// xsa as a library: the public API in one include. Link xsa::xsa (CMake: find_package(xsa)) or
// `pkg-config --cflags --libs xsa`. Each header documents its part; examples/ shows them at work.
//
//   model configuration        xsa/model/model_config.h      ModelConfig, set_attention
//   a model: create, train,    xsa/model/gpt.h         Gpt<float> (forward, forward_backward)
//     score its loss
//   load and save              xsa/io/checkpoint.h     save_checkpoint, load_checkpoint_*
//   the training step          xsa/train/step.h        TrainStep, OptimizerSettings,
//     and optimizer                                    Parallelism (data parallelism, ZeRO-1)
//   processes of a data-       xsa/dist/comm.h         Comm (rank-ordered sums), world_comm,
//     parallel run (MPI)                               join_launched_job; xsa/dist/agree.h
//   the schedule, whole runs   xsa/train/schedule.h    LrSchedule; xsa/train/trainer.h: train()
//   datasets, batch loader     xsa/data/dataset.h      open_dataset, BatchLoader, val_batch
//   tokenizers                 xsa/tokenizer/tokenizer.h  make_tokenizer (byte, GPT-2 BPE)
//   scoring                    xsa/eval/evaluate.h     evaluate_loss, score_continuations,
//                                                      evaluate_task
//   generation (kv cache)      xsa/model/decoder.h     Decoder<float>
//                              xsa/infer/sampler.h     Sampler, generate
//   the attention kernel       xsa/ops/attention.h     AttentionArgs, attention_forward/backward
//   backends                   xsa/backend/backend.h   Backend, cpu_backend(), DeviceBuffer
//   threads                    xsa/util/threads.h      set_thread_count
//
// Errors in input (a file, a value) throw xsa::Error (xsa/util/error.h) with one line naming it.
#pragma once

#include "xsa/backend/backend.h"
#include "xsa/data/dataset.h"
#include "xsa/dist/agree.h"
#include "xsa/dist/comm.h"
#include "xsa/eval/evaluate.h"
#include "xsa/infer/sampler.h"
#include "xsa/io/checkpoint.h"
#include "xsa/model/model_config.h"
#include "xsa/model/decoder.h"
#include "xsa/model/gpt.h"
#include "xsa/ops/attention.h"
#include "xsa/tokenizer/tokenizer.h"
#include "xsa/train/schedule.h"
#include "xsa/train/step.h"
#include "xsa/train/trainer.h"
#include "xsa/util/error.h"
#include "xsa/util/threads.h"
