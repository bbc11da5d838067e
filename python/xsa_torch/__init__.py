"""xsa_torch: xsa's fused CPU attention as a PyTorch operator, a nanoGPT-style attention module on
top of it, and a loader that turns an xsa checkpoint into a PyTorch GPT.

- attention(q, k, v, exclusive=True, gate=None, sink=None): causal attention in the layout of
  F.scaled_dot_product_attention (q [B, H, T, D], k and v [B, Hkv, T, D] → [B, H, T, D]), SA or
  XSA (docs/SPEC.md §2), gated XSA, attention sinks and grouped-query attention, with gradients
  for q, k, v, gate and sink. O(T) memory: the T×T matrix is never formed.
- attention_packed(qkv, heads, ...): the same on c_attn's output [B, T, C + 2·Hkv·D] → [B, T, C],
  the kernel's own layout (no transposes).
- CausalSelfAttention: nanoGPT's module (c_attn, c_proj, n_head) on the kernel, XSA by default.
- load(RUN): an nn.Module GPT with the weights of an xsa run or checkpoint folder.

The kernel serves CPU float32 and float64 tensors; other devices and dtypes fall back to the same
math written in PyTorch (reference_attention), which does form the T×T matrix.
"""
import json
import math
import os
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

try:
    from . import _C
except ImportError as error:  # not built yet: say how when the kernel is first needed
    _C, _import_error = None, error

__all__ = ["attention", "attention_packed", "reference_attention", "CausalSelfAttention", "GPT",
           "load", "read_safetensors"]

XSA_EPSILON = 1e-6  # u = v / max(‖v‖, 1e-6), docs/SPEC.md §2


def _kernel_serves(*tensors):
    served = (torch.float32, torch.float64)
    if not all(t.device.type == "cpu" and t.dtype in served for t in tensors):
        return False
    if _C is None:
        raise ImportError(f"xsa_torch: the extension is not built ({_import_error}); "
                          "run `bash python/build.sh` after `bash scripts/build.sh`")
    return True


def _per_head(value, heads, like, name):
    """A gate or sink as a [heads] tensor of like's dtype (numbers are broadcast to every head)."""
    if value is None:
        return None
    if not torch.is_tensor(value):
        return torch.full((heads,), float(value), dtype=like.dtype, device=like.device)
    if value.shape != (heads,):
        raise ValueError(f"xsa_torch: {name} must have shape [{heads}], not {list(value.shape)}")
    return value.to(like.dtype)


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, gate, sink, exclusive):
        out, qkv, y, lse = _C.forward(q, k, v, exclusive, gate, sink)
        # The packed copy of q, k, v, y (not z) and the row log-sum-exp: all the backward needs.
        ctx.qkv, ctx.y, ctx.lse = qkv, y, lse
        ctx.shape = (q.shape[1], k.shape[1], exclusive)
        ctx.save_for_backward(gate, sink)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        gate, sink = ctx.saved_tensors
        heads, kv_heads, exclusive = ctx.shape
        dq, dk, dv, dgate, dsink = _C.backward(grad, ctx.qkv, ctx.y, ctx.lse, heads, kv_heads,
                                               exclusive, gate, sink)
        return dq, dk, dv, dgate, dsink, None


class _PackedAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, qkv, gate, sink, heads, kv_heads, exclusive):
        out, y, lse = _C.forward_packed(qkv, heads, kv_heads, exclusive, gate, sink)
        ctx.shape = (heads, kv_heads, exclusive)
        ctx.lse = lse
        if exclusive:  # y stays private: the output is z
            ctx.y = y
            ctx.save_for_backward(qkv, gate, sink)
        else:  # the output is y itself: saved as an output, so in-place changes to it are caught
            ctx.save_for_backward(qkv, gate, sink, out)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        heads, kv_heads, exclusive = ctx.shape
        if exclusive:
            (qkv, gate, sink), y = ctx.saved_tensors, ctx.y
        else:
            qkv, gate, sink, y = ctx.saved_tensors
        dqkv, dgate, dsink = _C.backward_packed(grad, qkv, y, ctx.lse, heads, kv_heads, exclusive,
                                                gate, sink)
        return dqkv, dgate, dsink, None, None, None


def attention(q, k, v, *, exclusive=True, gate=None, sink=None, kv_heads=None):
    """Causal attention with scale 1/sqrt(D): q [B, H, T, D], k and v [B, Hkv, T, D] → [B, H, T, D].

    exclusive: XSA, z = y − α_h (y·u) u with u = v/max(‖v‖, 1e-6) the token's own value; False: SA.
    gate: α_h values [H] (gated XSA; a model keeps w_h and passes tanh(w_h)); None: α = 1.
    sink: per-head sink logits b_h [H], each joining its row's softmax with a zero value.
    kv_heads: optional check of k's head count (grouped-query attention: head h reads kv head
    h // (H / Hkv)).
    """
    heads, kv = q.shape[1], k.shape[1]
    if kv_heads is not None and kv_heads != kv:
        raise ValueError(f"xsa_torch: kv_heads={kv_heads} but k has {kv} heads")
    if heads % kv:
        raise ValueError(f"xsa_torch: {kv} key/value heads do not divide {heads} heads")
    if gate is not None and not exclusive:
        raise ValueError("xsa_torch: a gate scales XSA's removal; it needs exclusive=True")
    gate, sink = _per_head(gate, heads, q, "gate"), _per_head(sink, heads, q, "sink")
    if not _kernel_serves(q, k, v):
        return reference_attention(q, k, v, exclusive=exclusive, gate=gate, sink=sink)
    return _Attention.apply(q, k, v, gate, sink, exclusive)


def attention_packed(qkv, heads, *, kv_heads=None, exclusive=True, gate=None, sink=None):
    """attention() on c_attn's layout: qkv [B, T, C + 2·Hkv·D] (q heads, then k, then v) →
    [B, T, C]."""
    kv_heads = kv_heads or heads
    if heads % kv_heads or qkv.shape[-1] % (heads + 2 * kv_heads):
        raise ValueError(f"xsa_torch: qkv width {qkv.shape[-1]} is not {heads} + 2*{kv_heads} "
                         "heads")
    if gate is not None and not exclusive:
        raise ValueError("xsa_torch: a gate scales XSA's removal; it needs exclusive=True")
    gate, sink = _per_head(gate, heads, qkv, "gate"), _per_head(sink, heads, qkv, "sink")
    if _kernel_serves(qkv):
        return _PackedAttention.apply(qkv, gate, sink, heads, kv_heads, exclusive)
    B, T, width = qkv.shape
    D = width // (heads + 2 * kv_heads)
    q, k, v = qkv.split([heads * D, kv_heads * D, kv_heads * D], dim=-1)
    q, k, v = (t.unflatten(-1, (-1, D)).transpose(1, 2) for t in (q, k, v))
    y = reference_attention(q, k, v, exclusive=exclusive, gate=gate, sink=sink)
    return y.transpose(1, 2).flatten(2)


def reference_attention(q, k, v, *, exclusive=True, gate=None, sink=None):
    """The same math in plain PyTorch; forms the [B, H, T, T] matrix (for other devices and dtypes,
    and as the baseline of bench/torch_attention.py)."""
    B, H, T, D = q.shape
    group = H // k.shape[1]
    if group > 1:
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
    future = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    if sink is not None:  # one more column per row: the sink's logit, with a zero value
        scores = torch.cat((scores, sink.view(1, H, 1, 1).expand(B, H, T, 1)), dim=-1)
    probs = F.softmax(scores, dim=-1)
    y = probs[..., :T] @ v
    if not exclusive:
        return y
    u = v / v.norm(dim=-1, keepdim=True).clamp_min(XSA_EPSILON)
    removal = (y * u).sum(-1, keepdim=True) * u
    if gate is not None:
        removal = removal * gate.view(1, H, 1, 1)
    return y - removal


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class RMSNorm(nn.Module):
    """x / √(mean(x²) + eps) ⊙ weight over the last dimension (QK-norm's, eps 1e-6 as xsa's)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class CausalSelfAttention(nn.Module):
    """nanoGPT's CausalSelfAttention on xsa's kernel, XSA by default.

    Drop-in: CausalSelfAttention(config) reads config.n_embd and config.n_head, and config.bias,
    config.dropout and config.block_size when present; keywords override them and choose the xsa
    options: exclusive (XSA or SA), gated (α_h = tanh(w_h) from a parameter `xsa_gate`, zero at
    the start unless gate_init), sink (a parameter `sink` [H]), kv_heads (grouped-query attention,
    c_attn then has C + 2·kv_heads·D rows), rope (xsa's RoPE on q and k: rotate-half pairing over
    the whole head, base rope_theta; off by default since nanoGPT adds learned positions),
    qk_norm (QK-norm: RMSNorm of each q and k head before RoPE, modules q_norm and k_norm with a
    weight [D] each, shared by the heads), value_embed (value embeddings: a table
    value_embed [vocab, kv_heads·D] whose row of each token joins its values; forward then takes
    the token ids, docs/SPEC.md §10).
    Dropout applies to the output only: the kernel has no dropout on attention probabilities.
    """

    def __init__(self, config=None, *, n_embd=None, n_head=None, exclusive=True, gated=False,
                 gate_init=0.0, sink=False, kv_heads=None, rope=False, rope_theta=10000.0,
                 bias=None, dropout=None, qk_norm=False, value_embed=0):
        super().__init__()
        self.n_embd = n_embd if n_embd is not None else config.n_embd
        self.n_head = n_head if n_head is not None else config.n_head
        self.n_kv_head = kv_heads or self.n_head
        use_bias = bias if bias is not None else getattr(config, "bias", False)
        self.dropout = dropout if dropout is not None else getattr(config, "dropout", 0.0)
        if self.n_embd % self.n_head or self.n_head % self.n_kv_head:
            raise ValueError(f"xsa_torch: n_embd {self.n_embd}, n_head {self.n_head} and "
                             f"kv_heads {self.n_kv_head} do not divide")
        self.head_dim = self.n_embd // self.n_head
        if rope and self.head_dim % 2:
            raise ValueError(f"xsa_torch: RoPE needs an even head size, not {self.head_dim}")
        self.exclusive, self.rope, self.rope_theta = exclusive, rope, rope_theta
        qkv_rows = self.n_embd + 2 * self.n_kv_head * self.head_dim
        self.c_attn = nn.Linear(self.n_embd, qkv_rows, bias=use_bias)
        self.c_proj = nn.Linear(self.n_embd, self.n_embd, bias=use_bias)
        if gated:
            if not exclusive:
                raise ValueError("xsa_torch: gated needs exclusive=True")
            self.xsa_gate = nn.Parameter(torch.full((self.n_head,), float(gate_init)))
        else:
            self.xsa_gate = None
        self.sink = nn.Parameter(torch.zeros(self.n_head)) if sink else None
        self.q_norm = RMSNorm(self.head_dim) if qk_norm else None
        self.k_norm = RMSNorm(self.head_dim) if qk_norm else None
        self.value_embed = (nn.Embedding(value_embed, self.n_kv_head * self.head_dim)
                            if value_embed else None)
        self.resid_dropout = nn.Dropout(self.dropout)
        if self.dropout > 0:
            warnings.warn("xsa_torch: dropout applies to the attention output only, not to the "
                          "attention probabilities", stacklevel=2)
        self.use_kernel = True  # False: the PyTorch math (reference_attention), for comparisons
        self._rope_cache = {}

    def rope_table(self, T, like):
        """cos and sin [T, 1, D] of angle t·theta^(−2j/D) for j < D/2, repeated for the pair's
        second half; computed in float64 then cast, as xsa does."""
        key = (T, like.dtype, like.device)
        if key not in self._rope_cache:
            D = self.head_dim
            inv = self.rope_theta ** (-2.0 * torch.arange(D // 2, dtype=torch.float64) / D)
            angle = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
            angle = torch.cat((angle, angle), dim=-1)[:, None, :]
            self._rope_cache = {key: (angle.cos().to(like), angle.sin().to(like))}
        return self._rope_cache[key]

    def forward(self, x, idx=None):
        B, T, C = x.shape
        qkv = self.c_attn(x)
        if self.value_embed is not None:  # each token's row joins its values, before anything
            if idx is None:
                raise ValueError("xsa_torch: value embeddings need the token ids (forward(x, idx))")
            kv_width = self.n_kv_head * self.head_dim
            qkv = torch.cat((qkv[..., : C + kv_width], qkv[..., C + kv_width:] +
                             self.value_embed(idx)), dim=-1)
        if self.rope or self.q_norm is not None:  # q and k inside the packed row; v as it is
            kv_width = self.n_kv_head * self.head_dim
            q, k, v = qkv.split([C, kv_width, kv_width], dim=-1)
            q, k = (t.unflatten(-1, (-1, self.head_dim)) for t in (q, k))
            if self.q_norm is not None:  # QK-norm, before RoPE
                q, k = self.q_norm(q), self.k_norm(k)
            if self.rope:
                cos, sin = self.rope_table(T, qkv)
                q, k = (t * cos + _rotate_half(t) * sin for t in (q, k))
            qkv = torch.cat((q.flatten(2), k.flatten(2), v), dim=-1)
        gate = torch.tanh(self.xsa_gate) if self.xsa_gate is not None else None
        options = dict(kv_heads=self.n_kv_head, exclusive=self.exclusive, gate=gate, sink=self.sink)
        if self.use_kernel:
            y = attention_packed(qkv, self.n_head, **options)
        else:
            D = self.head_dim
            q, k, v = qkv.split([C, self.n_kv_head * D, self.n_kv_head * D], dim=-1)
            q, k, v = (t.unflatten(-1, (-1, D)).transpose(1, 2) for t in (q, k, v))
            del options["kv_heads"]
            y = reference_attention(q, k, v, **options).transpose(1, 2).flatten(2)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    """GELU (tanh approximation), or ReLU² (relu(x)², config "mlp_activation": "relu2",
    docs/SPEC.md §11)."""

    def __init__(self, n_embd, bias=False, activation="gelu"):
        super().__init__()
        if activation not in ("gelu", "relu2"):
            raise ValueError(f"xsa_torch: MLP activation {activation!r} is not gelu or relu2")
        self.activation = activation
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=bias)
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=bias)

    def forward(self, x):
        h = self.c_fc(x)
        h = F.relu(h).square() if self.activation == "relu2" else F.gelu(h, approximate="tanh")
        return self.c_proj(h)


class Block(nn.Module):
    def __init__(self, config, layer):
        super().__init__()
        C, kind = config["n_embd"], config["layer_attn"][layer]
        sinks = config.get("layer_sink") or [False] * config["n_layer"]
        qk_norm = config.get("layer_qk_norm") or [False] * config["n_layer"]  # version 5
        value_embed = config.get("layer_value_embed") or [False] * config["n_layer"]  # version 6
        # The GPT-2 architecture (config version 2): learned positions (no RoPE), linear biases.
        learned = config.get("positions", "rope") == "learned"
        bias = bool(config.get("linear_bias", False))
        self.ln_1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(
            n_embd=C, n_head=config["n_head"], kv_heads=config.get("n_kv_head") or None,
            exclusive=kind != "sa", gated=kind.startswith("xsa-gated"), sink=sinks[layer],
            rope=not learned, rope_theta=config["rope_theta"], bias=bias, dropout=0.0,
            qk_norm=qk_norm[layer], value_embed=config["vocab_size"] if value_embed[layer] else 0)
        self.ln_2 = nn.LayerNorm(C)
        self.mlp = MLP(C, bias, config.get("mlp_activation", "gelu"))

    def forward(self, x, idx=None):
        x = x + self.attn(self.ln_1(x), idx)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """xsa-gpt (docs/SPEC.md §1) from an xsa config.json dict; parameter names are the
    checkpoint's (nanoGPT's state_dict names)."""

    def __init__(self, config):
        super().__init__()
        if config.get("format") != "xsa-gpt":
            raise ValueError("xsa_torch: not an xsa-gpt config (format != \"xsa-gpt\")")
        self.config = config
        C = config["n_embd"]
        modules = dict(
            wte=nn.Embedding(config["padded_vocab_size"], C),
            h=nn.ModuleList(Block(config, layer) for layer in range(config["n_layer"])),
            ln_f=nn.LayerNorm(C))
        if config.get("positions", "rope") == "learned":
            modules["wpe"] = nn.Embedding(config["seq_len"], C)
        self.transformer = nn.ModuleDict(modules)

    def set_use_kernel(self, use_kernel):
        for block in self.transformer.h:
            block.attn.use_kernel = use_kernel
        return self

    def forward(self, idx, targets=None):
        """Logits [B, T, vocab_size] over the real vocabulary (the padded rows of wte never win),
        soft-capped where the config says so, and the mean cross-entropy over targets ≠ −1 when
        targets are given."""
        x = self.transformer.wte(idx)
        if "wpe" in self.transformer:
            x = x + self.transformer.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.transformer.h:
            x = block(x, idx)
        x = self.transformer.ln_f(x)
        logits = F.linear(x, self.transformer.wte.weight[: self.config["vocab_size"]])  # tied head
        cap = self.config.get("logit_softcap", 0)
        if cap:  # soft-capping (config version 7, docs/SPEC.md §11): before the loss
            logits = cap * torch.tanh(logits / cap)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-1)
        return logits, loss


_SAFETENSORS_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
                       "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
                       "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8}


def read_safetensors(path):
    """{name: tensor} from a .safetensors file: 8-byte little-endian header length, a JSON header
    {name: {dtype, shape, data_offsets}}, then the raw little-endian data."""
    with open(path, "rb") as f:
        blob = bytearray(f.read())
    header_len = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = _SAFETENSORS_DTYPES[info["dtype"]]
        count = (end - begin) // torch.tensor([], dtype=dtype).element_size()
        flat = torch.frombuffer(blob, dtype=dtype, count=count, offset=base + begin)
        tensors[name] = flat.reshape(info["shape"]).clone()  # own storage, not the file's buffer
    return tensors


def resolve_checkpoint(path):
    """A checkpoint folder as is, or a run folder's latest ckpt_<step> folder (as xsa resolves
    it)."""
    if os.path.isfile(os.path.join(path, "config.json")) and \
            os.path.isfile(os.path.join(path, "model.safetensors")):
        return path
    steps = sorted(name for name in os.listdir(path)
                   if name.startswith("ckpt_") and name[5:].isdigit()
                   and os.path.isdir(os.path.join(path, name)))
    if not steps:
        raise FileNotFoundError(f"{path}: holds no checkpoint (no ckpt_* folder)")
    return os.path.join(path, steps[-1])  # zero-padded step numbers sort in order


def load(run, dtype=torch.float32):
    """A GPT (in eval mode) with the weights of an xsa run folder (its latest checkpoint) or
    checkpoint folder."""
    ckpt = resolve_checkpoint(run)
    with open(os.path.join(ckpt, "config.json")) as f:
        config = json.load(f)
    version = config.get("version", 1)
    rivals = [config["rivals"]] if "rivals" in config else config.get("layer_rivals", [])
    rivals_on = sorted({key for layer in rivals for key, on in layer.items() if on})
    # 3, 4: XSA's rivals (gated-attn, value-residual, no-self); 5: QK-norm, with or without them;
    # 6: value embeddings; 7: the recipe's MLP activation and logit soft-cap (docs/SPEC.md §10,
    # §11). This module computes QK-norm, value embeddings and the recipe, not the rivals.
    if version > 7 or (version > 2 and rivals_on):
        raise ValueError(f"{ckpt}: config version {version} (XSA's rivals {rivals_on}) is not "
                         f"computed by this module")
    model = GPT(config)
    model.load_state_dict(read_safetensors(os.path.join(ckpt, "model.safetensors")), strict=True)
    model.checkpoint = ckpt
    return model.to(dtype).eval()
