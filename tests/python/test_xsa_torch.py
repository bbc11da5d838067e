"""Tests of xsa_torch, the PyTorch operator over xsa's fused CPU attention (python/xsa_torch).

- gradcheck in float64 (central differences, torch's default eps 1e-6, atol 1e-5, rtol 1e-3) for
  SA, XSA, gated XSA, sinks and grouped-query attention, through both entry points;
- float32 agreement of outputs and of every gradient with the math written here in PyTorch
  (softmax(q kᵀ/√D + causal mask [+ sink column]) v, then z = y − α (y·u) u, u = v/max(‖v‖, 1e-6)):
  max |kernel − reference| within the rounding bound of the attention's chain of sums
  (chain_bound, as tests/bounds.h derives it) of max |reference|, against PyTorch's float32 (twice
  the bound: both round) and float64 results;
- the module (RoPE, gate, sink, GQA) against the same module on PyTorch's math, in float64,
  within the chain's bound at float64's roundoff;
- load(RUN) of checkpoints that xsa trains here: the validation loss equals `xsa eval`'s within
  twice the model's forward chain bound, and float64 logits of the kernel and of PyTorch's math
  agree within the chain's bound at float64's roundoff.

Run: bash tests/torch_test.sh BUILD_DIR SOURCE_DIR (builds the extension first), or with the
extension built in place (python/build.sh):
  PYTHONPATH=python XSA_BINARY=build/xsa python3 -m unittest discover -s tests/python
"""
import json
import math
import os
import subprocess
import sys
import tempfile
import types
import unittest

import torch

SOURCE_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.append(os.path.join(SOURCE_DIR, "python"))  # after PYTHONPATH: a built copy there wins
import xsa_torch  # noqa: E402

XSA_BINARY = os.environ.get("XSA_BINARY", os.path.join(SOURCE_DIR, "build", "xsa"))


def torch_attention(q, k, v, exclusive, gate=None, sink=None):
    """The math of docs/SPEC.md §2, written out in PyTorch, T×T matrix and all."""
    B, H, T, D = q.shape
    group = H // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(D)
    scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    if sink is not None:
        scores = torch.cat((scores, sink.view(1, H, 1, 1).expand(B, H, T, 1)), dim=-1)
    y = torch.softmax(scores, dim=-1)[..., :T] @ v
    if not exclusive:
        return y
    u = v / torch.clamp(v.norm(dim=-1, keepdim=True), min=1e-6)
    alpha = gate.view(1, H, 1, 1) if gate is not None else 1.0
    return y - alpha * (y * u).sum(-1, keepdim=True) * u


# (name, exclusive, gated, sink, kv heads of 4 query heads)
VARIANTS = [("sa", False, False, False, 4), ("xsa", True, False, False, 4),
            ("gated xsa", True, True, False, 4), ("sa + sink", False, False, True, 4),
            ("xsa + sink", True, False, True, 4), ("gqa xsa", True, False, False, 2),
            ("gqa gated xsa + sink", True, True, True, 1)]


def make_inputs(B, H, Hkv, T, D, gated, sink, dtype, seed=1):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(B, h, T, D, generator=g, dtype=torch.float64) for h in (H, Hkv, Hkv))
    gate = torch.tanh(torch.randn(H, generator=g, dtype=torch.float64)) if gated else None
    sinks = torch.randn(H, generator=g, dtype=torch.float64) if sink else None
    return [t.to(dtype).requires_grad_() if t is not None else None for t in (q, k, v, gate, sinks)]


class GradcheckFloat64(unittest.TestCase):
    def check(self, B, H, Hkv, T, D, exclusive, gated, sink):
        q, k, v, gate, sinks = make_inputs(B, H, Hkv, T, D, gated, sink, torch.float64)
        fn = lambda q, k, v, gate, sinks: xsa_torch.attention(  # noqa: E731
            q, k, v, exclusive=exclusive, gate=gate, sink=sinks)
        self.assertTrue(torch.autograd.gradcheck(fn, (q, k, v, gate, sinks)))

    def test_variants(self):
        for name, exclusive, gated, sink, Hkv in VARIANTS:
            with self.subTest(name):
                self.check(2, 4, Hkv, 9, 4, exclusive, gated, sink)

    def test_across_tiles(self):  # T = 70: two query and key tiles of 64
        self.check(1, 2, 1, 70, 4, True, True, True)

    def test_packed(self):  # the entry point of the module: c_attn's layout [B, T, C + 2·Hkv·D]
        g = torch.Generator().manual_seed(2)
        H, Hkv, D = 4, 2, 4
        qkv = torch.randn(2, 9, (H + 2 * Hkv) * D, generator=g, dtype=torch.float64,
                          requires_grad=True)
        gate = torch.tensor([0.3, -0.7, 0.9, 0.1], dtype=torch.float64, requires_grad=True)
        sinks = torch.tensor([0.5, -1.0, 0.0, 2.0], dtype=torch.float64, requires_grad=True)
        for exclusive, gate_or_none in ((False, None), (True, None), (True, gate)):
            fn = lambda qkv, gate, sinks: xsa_torch.attention_packed(  # noqa: E731
                qkv, H, kv_heads=Hkv, exclusive=exclusive, gate=gate, sink=sinks)
            self.assertTrue(torch.autograd.gradcheck(fn, (qkv, gate_or_none, sinks)))


DOUBLE = 2.0**-52  # float64 against float64: each side rounds (tests/bounds.h, kDoubleRoundoff)


def model_forward_sums(config, T):
    """The forward's chain of sums of an xsa model (tests/bounds.h, model_chain)."""
    C, V = config["n_embd"], config["padded_vocab_size"]
    D = C // config["n_head"]
    return [config["n_layer"] * (C + D + (T + 1) + T + C + C + 4 * C + 12), C, V, 4]


def chain_bound(sums, u=2.0**-24):
    """The rounding bound of a chain of sums of these lengths, relative to the scale of what it
    computes (tests/bounds.h, model_chain/chain_error): each sum's error within lambda*sqrt(n)*u of
    its magnitudes (Higham and Mary's model, any summation order), independent across the chain,
    adding in quadrature, lambda = 8."""
    return 8 * u * math.sqrt(sum(sums))


class Float32AgainstTorch(unittest.TestCase):
    """Outputs and every gradient of the float32 kernel against PyTorch's float32 and float64
    math, within the rounding bound of the attention's chain of sums: scores (D), the softmax and
    p.v (T each), XSA's dot products (D); the backward adds dP and D_i (D each) and dq, dk, dv (T
    each). Against float64 the kernel's own bound; against PyTorch's float32 twice it (both
    round)."""

    def test_variants(self):
        B, H, T, D = 2, 4, 200, 32  # T: three tiles of 64 and a partial one
        for name, exclusive, gated, sink, Hkv in VARIANTS:
            with self.subTest(name):
                probe = torch.randn(B, H, T, D, generator=torch.Generator().manual_seed(3))
                results = {}
                for impl, dtype in (("kernel", torch.float32), ("torch32", torch.float32),
                                    ("torch64", torch.float64)):
                    inputs = make_inputs(B, H, Hkv, T, D, gated, sink, dtype)
                    q, k, v, gate, sinks = inputs
                    if impl == "kernel":
                        out = xsa_torch.attention(q, k, v, exclusive=exclusive, gate=gate,
                                                  sink=sinks)
                    else:
                        out = torch_attention(q, k, v, exclusive, gate, sinks)
                    (out * probe.to(dtype)).sum().backward()
                    results[impl] = [out] + [t.grad for t in inputs if t is not None]
                labels = ["out", "dq", "dk", "dv"] + ["dgate"] * gated + ["dsink"] * sink
                forward = [D, T + 1, T, D]
                backward = forward + [D, D, 3 * T, B * T]  # (dgate and dsink sum over B*T rows)
                for reference, twice in (("torch32", 2), ("torch64", 1)):
                    for label, got, want in zip(labels, results["kernel"], results[reference]):
                        error = (got.double() - want.double()).abs().max().item()
                        scale = want.abs().max().item()
                        bound = twice * chain_bound(forward if label == "out" else backward)
                        self.assertLessEqual(error, bound * scale,
                                             f"{name}: {label} against {reference}")

    def test_zero_value(self):  # ‖v‖ < 1e-6: u = v/1e-6, and XSA then removes nothing
        q, k, v, _, _ = make_inputs(1, 2, 2, 16, 8, False, False, torch.float32)
        with torch.no_grad():
            v[:, :, 5] = 0
        out = xsa_torch.attention(q, k, v, exclusive=True)
        want = torch_attention(q, k, v, True)
        bound = 2 * chain_bound([8, 17, 16, 8]) * want.abs().max().item()  # D 8, T 16, both round
        torch.testing.assert_close(out, want, rtol=0, atol=bound)
        # Attention to a zero value leaves y as it was: the exclusive step then removes nothing.
        sa = xsa_torch.attention(q, k, v, exclusive=False)
        torch.testing.assert_close(out[:, :, 5], sa[:, :, 5], rtol=0, atol=0)

    def test_first_position_is_zero(self):  # y_0 = v_0, so z_0 = 0 exactly (docs/SPEC.md §2)
        q, k, v, _, _ = make_inputs(1, 2, 2, 8, 8, False, False, torch.float32)
        out = xsa_torch.attention(q, k, v, exclusive=True)
        self.assertEqual(out[:, :, 0].abs().max().item(), 0.0)

    def test_other_dtypes_fall_back(self):  # bfloat16: PyTorch's math, no kernel
        q, k, v, _, _ = make_inputs(1, 2, 2, 8, 8, False, False, torch.bfloat16)
        out = xsa_torch.attention(q, k, v)
        self.assertEqual(out.dtype, torch.bfloat16)
        torch.testing.assert_close(out, torch_attention(q, k, v, True))

    def test_gradient_is_not_modified(self):  # the kernel works on its own copy of ∂L/∂out
        q, k, v, _, _ = make_inputs(1, 2, 2, 8, 8, False, False, torch.float32)
        grad = torch.randn(1, 2, 8, 8)
        keep = grad.clone()
        xsa_torch.attention(q, k, v, exclusive=True).backward(grad)
        self.assertTrue(torch.equal(grad, keep))


class Module(unittest.TestCase):
    def test_matches_torch_math(self):
        torch.manual_seed(4)
        x = torch.randn(2, 70, 32, dtype=torch.float64)
        for options in (dict(exclusive=False), dict(exclusive=True),
                        dict(exclusive=True, gated=True, gate_init=0.8, sink=True, kv_heads=2)):
            with self.subTest(**options):
                attn = xsa_torch.CausalSelfAttention(n_embd=32, n_head=4, rope=True,
                                                     **options).double()
                results = []
                for use_kernel in (True, False):
                    attn.use_kernel = use_kernel
                    attn.zero_grad()
                    out = attn(x)
                    out.square().sum().backward()
                    results.append([out] + [p.grad.clone() for p in attn.parameters()])
                for got, want in zip(*results):
                    # both in float64: the module's chain of sums at float64's roundoff, of the
                    # largest entry: c_attn and c_proj (C 32), the attention's (D 8, T 70, as
                    # Float32AgainstTorch), their backward and the weights' sums over B·T rows
                    bound = chain_bound([32, 8, 71, 70, 8, 32, 32, 8, 8, 3 * 70, 140, 140], DOUBLE)
                    torch.testing.assert_close(got, want, rtol=0,
                                               atol=bound * want.abs().max().item())

    def test_nanogpt_config(self):  # CausalSelfAttention(config), as nanoGPT's Block builds it
        config = types.SimpleNamespace(n_embd=48, n_head=6, bias=True, dropout=0.0, block_size=32)
        attn = xsa_torch.CausalSelfAttention(config)
        self.assertEqual(attn.c_attn.weight.shape, (144, 48))
        self.assertIsNotNone(attn.c_proj.bias)
        out = attn(torch.randn(3, 32, 48))
        out.sum().backward()
        self.assertEqual(out.shape, (3, 32, 48))


@unittest.skipUnless(os.path.exists(XSA_BINARY), f"no xsa binary at {XSA_BINARY} (XSA_BINARY)")
class LoadCheckpoint(unittest.TestCase):
    """Trains small models with xsa, then scores their validation split with `xsa eval` and with
    load(RUN)."""

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.TemporaryDirectory()
        cls.text = os.path.join(cls.work.name, "text.txt")
        with open(cls.text, "wb") as out:  # the project's own prose: in every clone
            for name in ("README.md", "docs/SPEC.md"):
                with open(os.path.join(SOURCE_DIR, name), "rb") as f:
                    out.write(f.read())

    @classmethod
    def tearDownClass(cls):
        cls.work.cleanup()

    def train_and_eval(self, name, *options):
        run = os.path.join(self.work.name, name)
        subprocess.run([XSA_BINARY, "train", "--data", self.text, "--layers", "2", "--heads", "4",
                        "--embd", "64", "--seq-len", "64", "--batch", "4", "--steps", "5",
                        "--out", run, "--quiet", *options], check=True)
        report = os.path.join(run, "eval.json")
        subprocess.run([XSA_BINARY, "eval", "--ckpt", run, "--data", self.text, "--json", report],
                       check=True, stdout=subprocess.DEVNULL)
        with open(report) as f:
            return run, json.load(f)[0]

    def validation_windows(self, T, val_fraction=0.1):
        """xsa's validation split of a text file (byte tokens): the last max(round(n·0.1), T + 1)
        tokens, cut into windows of T + 1 at stride T."""
        with open(self.text, "rb") as f:
            ids = torch.tensor(list(f.read()), dtype=torch.long)
        n_val = max(int(math.floor(len(ids) * val_fraction + 0.5)), T + 1)
        val = ids[-n_val:]
        windows = (n_val - 1) // T
        inputs = torch.stack([val[w * T:w * T + T] for w in range(windows)])
        targets = torch.stack([val[w * T + 1:w * T + T + 1] for w in range(windows)])
        return inputs, targets

    def check_run(self, name, *options):
        run, xsa_result = self.train_and_eval(name, *options)
        model = xsa_torch.load(run)
        inputs, targets = self.validation_windows(model.config["seq_len"])
        self.assertEqual(targets.numel(), xsa_result["n"])
        sums = model_forward_sums(model.config, model.config["seq_len"])
        loss_bound = chain_bound(sums) * xsa_result["val_loss"]
        with torch.no_grad():
            _, loss = model(inputs, targets)
            # float32 here and in xsa: each within the forward chain's bound
            self.assertAlmostEqual(loss.item(), xsa_result["val_loss"], delta=2 * loss_bound)
            model64 = xsa_torch.load(os.path.join(run, "ckpt_000005"), dtype=torch.float64)
            logits_kernel, loss64 = model64(inputs, targets)
            logits_torch, _ = model64.set_use_kernel(False)(inputs, targets)
        self.assertAlmostEqual(loss64.item(), xsa_result["val_loss"], delta=loss_bound)
        torch.testing.assert_close(logits_kernel, logits_torch, rtol=0,
                                   atol=chain_bound(sums, DOUBLE) * logits_torch.abs().max().item())
        return model

    def test_xsa(self):
        self.check_run("xsa", "--attn", "xsa")

    def test_gated_sinks_gqa(self):  # SA + sink, then gated XSA (α = tanh 1 at the start) + sink
        model = self.check_run("variants", "--attn", "sa+sink,xsa-gated-one+sink", "--kv-heads",
                               "2")
        first, second = (block.attn for block in model.transformer.h)
        self.assertFalse(first.exclusive)
        self.assertTrue(second.exclusive and second.xsa_gate is not None)
        self.assertEqual((first.sink is not None, first.n_kv_head), (True, 2))

    def test_gpt2_architecture(self):  # learned positions and linear biases (--arch gpt2)
        model = self.check_run("gpt2", "--arch", "gpt2", "--attn", "xsa")
        self.assertIn("wpe", model.transformer)
        self.assertIsNotNone(model.transformer.h[0].attn.c_attn.bias)
        self.assertFalse(model.transformer.h[0].attn.rope)

    def test_qk_norm(self):  # QK-norm (config version 5) on both layers, with grouped keys
        # A high rate, so that the scales have moved away from 1 in 5 steps: an order of RMSNorm
        # and RoPE or a q/k mix-up would show (with scales of 1 they commute).
        model = self.check_run("qk_norm", "--attn", "xsa", "--qk-norm", "--kv-heads", "2",
                               "--lr", "0.05", "--warmup", "0")
        attn = model.transformer.h[0].attn
        self.assertEqual(tuple(attn.q_norm.weight.shape), (attn.head_dim,))
        self.assertGreater((attn.q_norm.weight - 1).abs().max().item(), 0.05)
        self.assertGreater((attn.k_norm.weight - attn.q_norm.weight).abs().max().item(), 0.01)


    def test_recipe(self):  # ReLU² and logits soft-capped at 5, trained with Muon (version 7)
        # A cap of 5 on logits that a high rate pushes past it, so that a missing or misplaced cap
        # (after the loss, or not at all) would move the loss by far more than the bound.
        model = self.check_run("recipe", "--attn", "xsa", "--mlp", "relu2", "--logit-softcap", "5",
                               "--optimizer", "muon", "--lr", "0.05", "--warmup", "0")
        self.assertEqual(model.transformer.h[0].mlp.activation, "relu2")
        self.assertEqual(model.config["logit_softcap"], 5)


    def test_value_embed(self):  # value embeddings (config version 6) with grouped keys
        # A high rate, so that the tables (zero at the start) have grown in 5 steps: a table added
        # to the wrong columns, or after the attention, would show.
        model = self.check_run("value_embed", "--attn", "xsa", "--value-embed", "--kv-heads", "2",
                               "--lr", "0.05", "--warmup", "0")
        table = model.transformer.h[0].attn.value_embed.weight
        self.assertEqual(tuple(table.shape), (256, 2 * model.transformer.h[0].attn.head_dim))
        self.assertGreater(table.abs().max().item(), 0.01)


class QkNormModule(unittest.TestCase):
    def test_matches_math_written_here(self):
        """The module's QK-norm (before RoPE) against RMSNorm and RoPE written out here per head
        in float64, and the kernel path against PyTorch's math."""
        torch.manual_seed(3)
        B, T, C, H, Hkv = 2, 9, 32, 4, 2
        D = C // H
        attn = xsa_torch.CausalSelfAttention(n_embd=C, n_head=H, kv_heads=Hkv, rope=True,
                                             qk_norm=True).double()
        with torch.no_grad():
            attn.q_norm.weight.copy_(torch.rand(D, dtype=torch.float64) + 0.5)
            attn.k_norm.weight.copy_(torch.rand(D, dtype=torch.float64) + 0.5)
        x = torch.randn(B, T, C, dtype=torch.float64)
        qkv = attn.c_attn(x)
        q, k, v = qkv.split([C, Hkv * D, Hkv * D], dim=-1)
        rows = []
        for t in range(T):
            angle = [t * 10000.0 ** (-2.0 * j / D) for j in range(D // 2)]
            def norm_rotate(vec, weight):
                out = vec / torch.sqrt((vec * vec).mean(0, keepdim=True) + 1e-6) * weight
                rotated = out.clone()
                for j in range(D // 2):
                    c, s = math.cos(angle[j]), math.sin(angle[j])
                    rotated[j] = c * out[j] - s * out[j + D // 2]
                    rotated[j + D // 2] = s * out[j] + c * out[j + D // 2]
                return rotated
            qs = [norm_rotate(q[:, t, h * D:(h + 1) * D].T, attn.q_norm.weight[:, None]).T
                  for h in range(H)]
            ks = [norm_rotate(k[:, t, g * D:(g + 1) * D].T, attn.k_norm.weight[:, None]).T
                  for g in range(Hkv)]
            rows.append(torch.cat(qs + ks + [v[:, t]], dim=-1))
        packed = torch.stack(rows, dim=1)
        qh, kh, vh = packed.split([C, Hkv * D, Hkv * D], dim=-1)
        qh, kh, vh = (t.unflatten(-1, (-1, D)).transpose(1, 2) for t in (qh, kh, vh))
        kh, vh = (t.repeat_interleave(H // Hkv, dim=1) for t in (kh, vh))
        y = torch_attention(qh, kh, vh, exclusive=True).transpose(1, 2).flatten(2)
        expected = attn.c_proj(y)
        with torch.no_grad():
            torch.testing.assert_close(attn(x), expected, rtol=0, atol=1e-12)
            attn.use_kernel = False
            torch.testing.assert_close(attn(x), expected, rtol=0, atol=1e-12)


if __name__ == "__main__":
    unittest.main()
