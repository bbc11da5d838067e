#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora into fuzz/corpus/<target>/: small files of every format
the readers take (a 2-layer, 8-wide byte-level model for the weight files), made here so that they
are reproducible without a build. Run from anywhere: python3 fuzz/make_corpus.py. Inputs that once
crashed a reader (regressions) live beside these under their own names and are never rewritten."""
import json
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(target, name, data):
    os.makedirs(os.path.join(ROOT, target), exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(ROOT, target, name), "wb") as f:
        f.write(data)


def values(n, seed):
    """n small floats from a fixed linear congruential sequence."""
    out, x = [], seed
    for _ in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) % 2**64
        out.append(((x >> 40) / 2**24 - 0.5) * 0.1)
    return out


def f32(vals):
    return struct.pack("<%df" % len(vals), *vals)


def bf16(vals):
    return b"".join(struct.pack("<H", struct.unpack("<I", struct.pack("<f", v))[0] >> 16) for v in vals)


def f16(vals):
    return struct.pack("<%de" % len(vals), *vals)


def safetensors(tensors, metadata=None, dtype="F32"):
    """tensors: [(name, shape)]; values made up; dtype F32, F16 or BF16."""
    pack = {"F32": f32, "F16": f16, "BF16": bf16}[dtype]
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for i, (name, shape) in enumerate(tensors):
        n = 1
        for d in shape:
            n *= d
        blob = pack(values(n, i + 1))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


# The tiny GPT-2-architecture model: V 256 (bytes), L 2, C 8, H 2, T 4.
V, L, C, H, T = 256, 2, 8, 2, 4


def hf_tensors(sink_layer=None):
    out = [("wte.weight", [V, C]), ("wpe.weight", [T, C])]
    for l in range(L):
        p = "h.%d." % l
        out += [(p + "ln_1.weight", [C]), (p + "ln_1.bias", [C]),
                (p + "attn.c_attn.weight", [C, 3 * C]), (p + "attn.c_attn.bias", [3 * C]),
                (p + "attn.c_proj.weight", [C, C]), (p + "attn.c_proj.bias", [C])]
        if l == sink_layer:
            out.append((p + "attn.sink", [H]))
        out += [(p + "ln_2.weight", [C]), (p + "ln_2.bias", [C]),
                (p + "mlp.c_fc.weight", [C, 4 * C]), (p + "mlp.c_fc.bias", [4 * C]),
                (p + "mlp.c_proj.weight", [4 * C, C]), (p + "mlp.c_proj.bias", [C])]
    return out + [("ln_f.weight", [C]), ("ln_f.bias", [C])]


def hf_config(**extra):
    cfg = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"],
           "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": T, "n_embd": C,
           "n_head": H, "n_layer": L, "n_positions": T, "tie_word_embeddings": True,
           "vocab_size": V}
    cfg.update(extra)
    return json.dumps(cfg, indent=2)


def llmc(version):
    Vp = 256
    header = [20240326, version, T, V, L, H, C, Vp] + [0] * 248
    n = Vp * C + T * C + L * (C + C + 3 * C * C + 3 * C + C * C + C + C + C + 4 * C * C + 4 * C + 4 * C * C + C) + 2 * C
    vals = values(n, 7)
    return struct.pack("<256i", *header) + (f32(vals) if version == 3 else bf16(vals))


def main():
    # safetensors: xsa's own F32 checkpoint layout, F16 and BF16, metadata, an empty tensor.
    small = [("transformer.ln_f.weight", [C]), ("transformer.h.0.attn.c_proj.weight", [C, C])]
    write("safetensors", "f32_small.safetensors", safetensors(small, {"format": "pt"}))
    write("safetensors", "f16_small.safetensors", safetensors(small, None, "F16"))
    write("safetensors", "bf16_small.safetensors", safetensors(small, {"a": "b"}, "BF16"))
    write("safetensors", "empty_tensor.safetensors", safetensors([("e", [0, 3]), ("s", [])]))
    write("safetensors", "no_tensors.safetensors", safetensors([], {"format": "pt"}))

    # Token shards: a few tokens, none.
    def shard(tokens):
        return struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)) + struct.pack(
            "<%dH" % len(tokens), *tokens)
    write("shard", "ten.bin", shard([50256, 15496, 11, 995, 50256, 40, 716, 13, 0, 65535]))
    write("shard", "empty.bin", shard([]))

    # Text for the tokenizers: English, contractions, digits, whitespace runs, other scripts,
    # emoji, invalid UTF-8.
    texts = {
        "english.txt": "Hello, world! It's a test: we'll see 12345 numbers, don't we?\n",
        "spaces.txt": "a  b\t\tc\n\n\n   d \u00a0\u3000e\r\n",
        "unicode.txt": "Gr\u00fc\u00dfe, \u4f60\u597d, \u043f\u0440\u0438\u0432\u0435\u0442, \U0001F600\U0001F44D",
        "code.txt": "for (int i = 0; i < n; i++) { x[i] += 1; }  // <|endoftext|>\n",
    }
    for target in ("gpt2_tokenizer", "byte_tokenizer"):
        for name, text in texts.items():
            write(target, name, text)
        write(target, "invalid_utf8.bin", b"ab\xff\xfe c\xc3\x28 \xe2\x82 d\xf0\x9f\x98")

    # Task files: a few lines of each format, one as a JSON array.
    tasks = {
        "arc_easy.jsonl": [{"id": "q1", "question": "Which is a metal?", "choices": {"text": ["wood", "iron", "glass"], "label": ["A", "B", "C"]}, "answerKey": "B"},
                           {"question": "2+2?", "choices": {"text": ["3", "4"], "label": ["1", "2"]}, "answerKey": "2"}],
        "boolq.jsonl": [{"passage": "The sky is blue.", "question": "is the sky blue", "answer": True},
                        {"passage": "Cats bark.", "question": "do cats bark", "label": 0}],
        "hellaswag.jsonl": [{"activity_label": "Cooking", "ctx_a": "A man cracks an egg.", "ctx_b": "he", "endings": ["fries it.", "eats the shell.", "sings [title] loudly.", "runs."], "label": 0},
                            {"ctx": "A dog runs", "endings": ["fast.", "slow.", "up.", "down."], "label": "2"}],
        "lambada.jsonl": [{"text": "She opened the door and saw her old friend"}, {"text": "the end"}],
        "openbookqa.jsonl": [{"question_stem": "Plants need", "choices": {"text": ["light", "rocks"], "label": ["A", "B"]}, "answerKey": " A"}],
        "piqa.jsonl": [{"goal": "Open a jar", "sol1": "Twist the lid.", "sol2": "Eat the jar.", "label": 0}],
        "social_iqa.jsonl": [{"context": "Alex gave a gift.", "question": "How does Alex feel?", "answerA": "happy", "answerB": "sad", "answerC": "angry", "label": "1"}],
        "winogrande.jsonl": [{"sentence": "The cup fell off the table because _ was unsteady.", "option1": "the cup", "option2": "the table", "answer": "2"}],
        "mc.jsonl": [{"context": "The capital of France is", "choices": ["Paris", "Rome", "Berlin"], "label": 1}],
    }
    for name, records in tasks.items():
        write("tasks", name, "".join(json.dumps(r) + "\n" for r in records))
    write("tasks", "arc_challenge_array.json", json.dumps(tasks["arc_easy.jsonl"], indent=1))
    write("tasks", "bad_lines.jsonl", '{"context": "x", "choices": ["a", "b"], "label": 1}\nnot json\n\r\n{"context": "y", "choices": ["a"], "label": 3}\n')

    # A checkpoint's config.json: the default architecture, GPT-2's, gates, sinks, kv heads.
    base = {"format": "xsa-gpt", "layer_attn": ["xsa", "xsa"], "layer_sink": [False, False],
            "n_embd": 8, "n_head": 2, "n_kv_head": 2, "n_layer": 2, "padded_vocab_size": 256,
            "rope_theta": 10000.0, "seq_len": 8, "tokenizer": "byte", "version": 1, "vocab_size": 256}
    write("model_config", "xsa.json", json.dumps(base, indent=2))
    write("model_config", "gpt2_arch.json", json.dumps(dict(base, version=2, positions="learned", linear_bias=True, layer_attn=["sa", "sa"]), indent=2))
    write("model_config", "gated_sink_gqa.json", json.dumps(dict(base, n_head=4, n_kv_head=2, layer_attn=["xsa-gated", "xsa-gated-one"], layer_sink=[True, False], tokenizer="gpt2", vocab_size=50257, padded_vocab_size=50304)))

    # trainer.json as xsa train writes it, and an older one without most settings.
    run = {"adam_eps": 1e-08, "batch": 2, "beta1": 0.9, "beta2": 0.95, "ckpt_every": 0, "data": "text.txt",
           "grad_clip": 1.0, "init_from": "", "log_every": 10, "lr": 0.001, "min_lr_fraction": 0.1,
           "out": "run", "overlap": False, "precision": "fp32", "seed": 1, "shuffle": True, "steps": 2,
           "threads": 0, "tokenizer": "byte", "total_batch_tokens": 16, "val_batches": 8,
           "val_every": 100, "val_fraction": 0.1, "warmup": 0, "weight_decay": 0.1, "zero": 0}
    state = {"accumulation_steps": 1, "data": {"source": "text.txt", "train_tokens": 272889, "val_tokens": 30321},
             "data_position": {"cursor": 4, "epoch": 0}, "elapsed_s": 0.001162103, "rng_state": 1,
             "run": run, "step": 2, "tokens_seen": 32, "world_size": 1}
    write("run_config", "trainer.json", json.dumps(state, indent=2))
    write("run_config", "old_trainer.json", json.dumps({"step": 5, "run": {"batch": 4, "steps": 10, "lr": 0.01, "seed": 3}}))

    write("shard_meta", "gpt2.json", json.dumps({"tokenizer": "gpt2", "vocab_size": 50257, "tokens": {"train": 10, "val": 2}}))
    write("shard_meta", "byte.json", json.dumps({"tokenizer": "byte"}))
    write("shard_meta", "none.json", "{}")

    # The attention grammar: the layer count (two bytes), then the spec.
    for i, (layers, spec) in enumerate([(4, "xsa"), (4, "sa,xsa,xsa-gated+sink,sa+no-self"), (12, "xsa-last3+qk-norm"), (6, "xsa-layers-0.2.5+gated-attn"), (257, "xsa-layers-256")]):
        write("attention", f"spec{i}.bin", layers.to_bytes(2, "little") + spec.encode())
    # train's command line, one argument a line.
    write("cli_args", "small.txt", "--layers\n2\n--heads\n2\n--embd\n16\n--attn\nxsa-last1+sink\n--batch\n4\n--steps\n10\n")
    write("cli_args", "edges.txt", "--layers\n257\n--seq-len\n16777217\n--lr\nnan\n--attn\nxsa-layers-299\n")
    write("cli_args", "lists.txt", "--layers\n3\n--attn\nsa,xsa,xsa+value-residual\n--kv-heads\n1\n--heads\n4\n--embd\n32\n")
    write("cli_config", "train.toml", 'data = "text.txt"\nattn = "xsa"\nlayers = 2\nsteps = 10\nlr = 0.001\nshuffle = false\n[section]\nkey = [1, 2, 3]\n')
    write("cli_config", "train.ini", "; comment\n[default]\nbatch=4\nseq-len = 64\nquiet = true\nout = 'runs/x'\n")

    write("llmc", "tiny_v3_fp32.bin", llmc(3))
    write("llmc", "tiny_v5_bf16.bin", llmc(5))

    write("hf", "tiny_bf16", hf_config().encode() + b"\0" + safetensors(hf_tensors(), {"format": "pt"}, "BF16"))
    write("hf", "tiny_xsa_sink_f16", hf_config(xsa_layer_attn="xsa,sa+sink").encode() + b"\0" + safetensors(hf_tensors(sink_layer=1), None, "F16"))


if __name__ == "__main__":
    main()
