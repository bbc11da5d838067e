// Causal multi-head attention, flash-attention style, in O(T) memory: tiles of queries against
// tiles of keys, an online softmax over key tiles, the tile products in registers. The forward
// keeps y and the row log-sum-exp; the backward recomputes each probability tile from q, k and the
// lse. XSA runs as separate parallel passes in the same call (docs/perf-log.md #3: fused into the
// tile epilogue it cost more): after the tiles the forward writes z = y − (y·u)u beside y, and
// before them the backward turns ∂L/∂z into ∂L/∂y and adds the own-value gradient (docs/SPEC.md
// §2). The cached variant, one row at a time, does compute z in its epilogue.
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "xsa/ops/matmul_bf16.h"
#include "xsa/ops/ops.h"
#include "xsa/ops/vmath.h"
#include "xsa/ops/xsa_row.h"
#include "xsa/util/error.h"

// clang-format off: after every other include (ops/kernel_level.h)
#include "xsa/ops/kernel_level.h"
// clang-format on

namespace xsa::ops::XSA_LEVEL {
namespace {

constexpr int kQueryTile = 64;
constexpr int kKeyTile = 64;
template <typename Real>
constexpr bool kIsFloat = std::is_same_v<Real, float>;

// Per-thread scratch, grown on first use and then reused: no allocation in steady state.
template <typename Real>
Real* scratch(size_t n, int slot) {
  thread_local std::vector<Real> buffers[7];
  if (buffers[slot].size() < n) buffers[slot].resize(n);
  return buffers[slot].data();
}

// The keys of a tile at j0 that query i sees: causal, key j0 + c ≤ i (no-self: < i).
inline int visible_keys(int cols, int i, int j0, bool no_self) {
  return std::max(0, std::min(cols, i - j0 + (no_self ? 0 : 1)));
}

// The backward's probabilities of one tile in place: S[r][c] (scaled scores) → exp(S − lse[r]) for
// keys c that query r may see (visible_keys), 0 for the others.
template <typename Real>
void exp_tile(Real* S, int rows, int cols, int i0, int j0, const Real* lse, bool no_self) {
  for (int r = 0; r < rows; r++) {
    Real* s = S + (size_t)r * kKeyTile;
    const int visible = visible_keys(cols, i0 + r, j0, no_self);
    const Real m = lse[r];
    if (visible == kKeyTile) {  // every key visible (most tiles at long context): no masks
#pragma omp simd
      for (int c = 0; c < kKeyTile; c++) s[c] = fast_exp(s[c] - m);
      continue;
    }
#pragma omp simd
    for (int c = 0; c < cols; c++) s[c] = c < visible ? fast_exp(s[c] - m) : Real(0);
  }
}

// ---------------------------------------------------------------- fp32 and float64 tile products
// The tiles' products in registers: C [M, N] = alpha·A·B (+ C), A read through strides (any layout,
// one element broadcast at a time, so a transposed A costs nothing) and B's rows contiguous. A BLAS
// call per 64 × 64 tile spent more on its call and packing than on the products at D 32-128
// (docs/perf-log.md #38). The register blocks (MR rows × NV vectors) fill the level's registers.
#if XSA_LEVEL_IS_AVX512
constexpr int kVectorBytes = 64, kRegisters = 32;
#else
constexpr int kVectorBytes = 32, kRegisters = 16;
#endif
template <typename Real>
struct Lanes {  // the level's widest vector of Real, loaded and stored at any alignment
  typedef Real type
      __attribute__((vector_size(kVectorBytes), aligned(sizeof(Real)), __may_alias__));
  static constexpr int count = kVectorBytes / sizeof(Real);
};

// A tile product's operands: A(m, p) = A[m·a_m + p·a_p], B(p, n) = B[p·ldb + n], C's rows ldc
// apart. In: Real for the fp32 and float64 tiles, a word of two bf16 for the bf16 ones (C fp32).
template <typename In, typename Out = In>
struct Operands {
  const In* A;
  size_t a_m, a_p;
  const In* B;
  size_t ldb;
  Out* C;
  size_t ldc;
  Operands at(int m, int n) const {  // the operands of C's block at row m, column n
    return {A + m * a_m, a_m, a_p, B + n, ldb, C + m * ldc + n, ldc};
  }
};

// MR rows × NV vectors of C, summed over K in order (the same bits whatever the thread count).
template <typename Real, int MR, int NV>
inline void product_block(int K, const Operands<Real>& o, Real alpha, bool accumulate) {
  using V = typename Lanes<Real>::type;
  constexpr int L = Lanes<Real>::count;
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) acc[r][v] = V{};
  for (int p = 0; p < K; p++) {
    const Real* b_row = o.B + p * o.ldb;
    V b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) b[v] = *(const V*)(b_row + v * L);
#pragma GCC unroll 16
    for (int r = 0; r < MR; r++) {
      const Real a = o.A[r * o.a_m + p * o.a_p];
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) acc[r][v] += a * b[v];
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) {
      V* c = (V*)(o.C + r * o.ldc + v * L);
      *c = accumulate ? acc[r][v] * alpha + *c : acc[r][v] * alpha;
    }
}

// `rows` (< R) rows of NV vectors: the block of that many rows.
template <typename Real, int NV, int R>
void product_rows_left(int rows, int K, const Operands<Real>& o, Real alpha, bool accumulate) {
  if constexpr (R > 1)
    if (rows < R) return product_rows_left<Real, NV, R - 1>(rows, K, o, alpha, accumulate);
  product_block<Real, R, NV>(K, o, alpha, accumulate);
}

// Every row of NV vectors' columns, in blocks of as many rows as the registers hold.
template <typename Real, int NV>
void product_columns(int M, int K, const Operands<Real>& o, Real alpha, bool accumulate) {
  constexpr int MR = std::min(12, (kRegisters - NV - 2) / NV);
  int m = 0;
  for (; m + MR <= M; m += MR) product_block<Real, MR, NV>(K, o.at(m, 0), alpha, accumulate);
  if (m < M) product_rows_left<Real, NV, MR - 1>(M - m, K, o.at(m, 0), alpha, accumulate);
}

// C [M, N] = alpha · A · B (+ C when accumulate): blocks of 4, 2 and 1 vectors of columns, then
// the columns left over one at a time.
template <typename Real>
void tile_product(int M, int N, int K, const Operands<Real>& o, Real alpha, bool accumulate) {
  constexpr int L = Lanes<Real>::count, widest = kRegisters == 32 ? 4 : 2;
  int n = 0;
  for (; n + widest * L <= N; n += widest * L)
    product_columns<Real, widest>(M, K, o.at(0, n), alpha, accumulate);
  if constexpr (widest == 4)
    for (; n + 2 * L <= N; n += 2 * L)
      product_columns<Real, 2>(M, K, o.at(0, n), alpha, accumulate);
  for (; n + L <= N; n += L) product_columns<Real, 1>(M, K, o.at(0, n), alpha, accumulate);
  for (; n < N; n++)
    for (int m = 0; m < M; m++) {
      Real sum = 0;
      for (int p = 0; p < K; p++) sum += o.A[m * o.a_m + p * o.a_p] * o.B[p * o.ldb + n];
      Real& c = o.C[m * o.ldc + n];
      c = accumulate ? sum * alpha + c : sum * alpha;
    }
}

// Rows of keys or values as tile products' B operands: transposed per key tile (kᵀ for q·kᵀ, vᵀ for
// dy·vᵀ: [D][kKeyTile] blocks, one after another, so that a tile's rows are near each other in
// the cache whatever T), or copied as contiguous rows [T][D] (v for p·v, k for ds·k).
// fp32 squares of W × W go through registers (W: the level's vector of floats): one element at a
// time, the pack cost about a tenth of a T 256 attention (the keys are read by few query tiles).
#if XSA_LEVEL_IS_AVX512
constexpr int kTransposeWidth = 16;
// GCC 12 warns of the _mm512_undefined_ps() inside its own shuffle intrinsics.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// out[i·ldo + j] = in[j·ldi + i] for a 16 × 16 square of floats.
inline void transpose_square(const float* in, size_t ldi, float* out, size_t ldo) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(in + i * ldi);
  for (int i = 0; i < 16; i += 2) {  // pairs of rows: 2 × 2 blocks of single floats
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // 4 × 4 blocks within each 128-bit lane
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int i = 0; i < 4; i++) {  // then the 128-bit lanes: 4 × 4 blocks of them
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 4; i++) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd);
  }
  for (int i = 0; i < 16; i++) _mm512_storeu_ps(out + i * ldo, r[i]);  // r[i]: column i
}
#pragma GCC diagnostic pop
#else
constexpr int kTransposeWidth = 8;
inline void transpose_square(const float* in, size_t ldi, float* out, size_t ldo) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(in + i * ldi);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int i = 0; i < 4; i++) {
    _mm256_storeu_ps(out + i * ldo, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(out + (i + 4) * ldo, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}
#endif

template <typename Real>
void pack_tiles_transposed(const Real* X, int T, int D, int ld, Real* out) {
  for (int j0 = 0; j0 < T; j0 += kKeyTile) {
    const int cols = std::min(kKeyTile, T - j0);
    Real* block = out + (size_t)j0 * D;
    int c0 = 0, d0 = 0;
    if constexpr (kIsFloat<Real>) {
      constexpr int W = kTransposeWidth;
      for (; c0 + W <= cols; c0 += W)
        for (d0 = 0; d0 + W <= D; d0 += W)
          transpose_square(X + (size_t)(j0 + c0) * ld + d0, ld, block + (size_t)d0 * kKeyTile + c0,
                           kKeyTile);
      // what the squares left: the last columns d0 … D of every key before c0
      for (int c = 0; c < c0; c++)
        for (int d = d0; d < D; d++) block[(size_t)d * kKeyTile + c] = X[(size_t)(j0 + c) * ld + d];
    }
    for (int c = c0; c < cols; c++)  // and every column of the keys from c0 on
      for (int d = 0; d < D; d++) block[(size_t)d * kKeyTile + c] = X[(size_t)(j0 + c) * ld + d];
  }
}
template <typename Real>
size_t tiles_transposed_size(int T, int D) {
  return (size_t)(T + kKeyTile - 1) / kKeyTile * kKeyTile * D;
}

// ---------------------------------------------------------------- bf16 tile products
// Mixed precision's tile products (tile_products bf16): operands are 32-bit words, each a pair of
// bf16 along the summed dimension (low half first), as AVX512_BF16's dot product takes them. A's
// word (m, p) is read at A[m·a_m + p·a_p], any strides, since the kernel broadcasts it; B's words
// (p, n) at B[p·ldb + n], contiguous in n. So a transposed A costs nothing, and only B operands
// need a transposing pack: kᵀ and vᵀ, packed once per (sequence, kv head).
using Word = uint32_t;

inline Word pair_word(float lo, float hi) {
  return (Word)round_to_bf16(lo) | (Word)round_to_bf16(hi) << 16;
}

// Pairs of adjacent columns: out[r·out_r + p·out_p] = (X[r][2p], X[r][2p+1]) for r < R and
// p < ⌈W/2⌉; a missing partner is 0.
void pack_column_pairs(const float* X, int R, int W, int ld, Word* out, size_t out_r,
                       size_t out_p) {
  const int full = W / 2;
  for (int r = 0; r < R; r++) {
    const float* x = X + (size_t)r * ld;
    Word* o = out + r * out_r;
    if (out_p == 1) {
#pragma omp simd
      for (int p = 0; p < full; p++) o[p] = pair_word(x[2 * p], x[2 * p + 1]);
    } else {
      for (int p = 0; p < full; p++) o[p * out_p] = pair_word(x[2 * p], x[2 * p + 1]);
    }
    if (W % 2) o[full * out_p] = pair_word(x[W - 1], 0.0f);
  }
}

// Pairs of adjacent rows: out[p·ldo + c] = (X[2p][c], X[2p+1][c]) for p < ⌈R/2⌉ and c < W.
void pack_row_pairs(const float* X, int R, int W, int ld, Word* out, int ldo) {
  for (int p = 0; p < (R + 1) / 2; p++) {
    const float* x0 = X + (size_t)(2 * p) * ld;
    const float* x1 = x0 + ld;
    Word* o = out + (size_t)p * ldo;
    if (2 * p + 1 < R) {
#pragma omp simd
      for (int c = 0; c < W; c++) o[c] = pair_word(x0[c], x1[c]);
    } else {
#pragma omp simd
      for (int c = 0; c < W; c++) o[c] = pair_word(x0[c], 0.0f);
    }
  }
}

// The bf16 tiles' operands: A's word (m, p) (any strides, since the kernel broadcasts it), B's
// words of row p contiguous.
using TileOperands = Operands<Word, float>;

#if XSA_LEVEL_IS_AVX512
#define XSA_BF16_TARGET __attribute__((target("avx512f,avx512bf16")))

// MR rows of C [·, N] = alpha · A · B (+ C), K2 words deep: MR × 64 columns in 4·MR fp32
// accumulators, each step one dot product of bf16 pairs per accumulator.
template <int MR>
XSA_BF16_TARGET void tile_rows_bf16(int N, int K2, const TileOperands& o, float alpha,
                                    bool accumulate) {
  const Word *A = o.A, *B = o.B;
  const size_t a_m = o.a_m, a_p = o.a_p;
  const size_t ldb = o.ldb, ldc = o.ldc;
  float* C = o.C;
  for (int n0 = 0; n0 < N; n0 += 64) {
    __mmask16 mask[4];
    for (int v = 0; v < 4; v++) {
      const int left = N - n0 - 16 * v;
      mask[v] = left >= 16  ? (__mmask16)0xffff
                : left <= 0 ? (__mmask16)0
                            : (__mmask16)((1u << left) - 1);
    }
    __m512 acc[MR][4];
    for (int r = 0; r < MR; r++)
      for (int v = 0; v < 4; v++) acc[r][v] = _mm512_setzero_ps();
    for (int p = 0; p < K2; p++) {
      __m512i b[4];
      for (int v = 0; v < 4; v++)
        b[v] = _mm512_maskz_loadu_epi32(mask[v], B + (size_t)p * ldb + n0 + 16 * v);
      for (int r = 0; r < MR; r++) {
        const __m512i a = _mm512_set1_epi32((int)A[r * a_m + p * a_p]);
        for (int v = 0; v < 4; v++)
          acc[r][v] = _mm512_dpbf16_ps(acc[r][v], (__m512bh)a, (__m512bh)b[v]);
      }
    }
    const __m512 scale = _mm512_set1_ps(alpha);
    for (int r = 0; r < MR; r++)
      for (int v = 0; v < 4; v++) {
        float* c = C + (size_t)r * ldc + n0 + 16 * v;
        __m512 out = _mm512_mul_ps(acc[r][v], scale);
        if (accumulate) out = _mm512_add_ps(out, _mm512_maskz_loadu_ps(mask[v], c));
        _mm512_mask_storeu_ps(c, mask[v], out);
      }
  }
}

// C [M, N] = alpha · A · B, or C += alpha · A · B when accumulate.
XSA_BF16_TARGET void tile_product_bf16(int M, int N, int K2, const TileOperands& o, float alpha,
                                       bool accumulate) {
  int m = 0;
  TileOperands rows = o;
  for (; m + 4 <= M; m += 4) {
    rows.A = o.A + m * o.a_m, rows.C = o.C + (size_t)m * o.ldc;
    tile_rows_bf16<4>(N, K2, rows, alpha, accumulate);
  }
  rows.A = o.A + m * o.a_m, rows.C = o.C + (size_t)m * o.ldc;
  switch (M - m) {
    case 3:
      return tile_rows_bf16<3>(N, K2, rows, alpha, accumulate);
    case 2:
      return tile_rows_bf16<2>(N, K2, rows, alpha, accumulate);
    case 1:
      return tile_rows_bf16<1>(N, K2, rows, alpha, accumulate);
    default:
      return;
  }
}
#else
// bf16 tiles come with --precision bf16, which needs AVX512_BF16 and so this file's avx512 level.
void tile_product_bf16(int, int, int, const TileOperands&, float, bool) {
  XSA_CHECK(false, "bf16 attention tiles at the {} level", "baseline");
}
#endif

// A task-local gradient's start: what dqkv's rows hold (`from_dqkv`), or zeros.
template <typename Real>
void start_rows(Real* acc, const Real* dqkv_rows, int ld, int rows, int D, bool from_dqkv) {
  if (from_dqkv)
    copy_rows(acc, D, dqkv_rows, ld, rows, D);
  else
    std::fill(acc, acc + (size_t)rows * D, Real(0));
}

// Per-thread word scratch, as scratch() for floats.
Word* word_scratch(size_t n, int slot) {
  thread_local std::vector<Word> buffers[6];
  if (buffers[slot].size() < n) buffers[slot].resize(n);
  return buffers[slot].data();
}

// One (sequence, kv head)'s keys or values packed as a B operand: transposed (pairs along the head
// dimension, [⌈D/2⌉][T], for q·kᵀ and dy·vᵀ) or as pairs of rows ([⌈T/2⌉][D], for p·v and ds·k).
void pack_transposed(const float* X, int T, int D, int ld, Word* out) {
  pack_column_pairs(X, T, D, ld, out, 1, T);
}
size_t transposed_words(int T, int D) {
  return (size_t)(D + 1) / 2 * T;
}
size_t row_pair_words(int T, int D) {
  return (size_t)(T + 1) / 2 * D;
}

// The contract of AttentionArgs, checked once per call (a bug, not bad input, when it fails).
template <typename Real>
void check_args(const AttentionArgs<Real>& a, bool backward) {
  XSA_CHECK(a.B > 0 && a.T > 0 && a.H > 0 && a.C % a.H == 0, "attention shape B {} T {} C {} H {}",
            a.B, a.T, a.C, a.H);
  XSA_CHECK(a.Hkv >= 0 && (a.Hkv == 0 || a.H % a.Hkv == 0), "{} kv heads for {} heads", a.Hkv, a.H);
  XSA_CHECK(a.qkv && a.y, "attention needs qkv and y");
  XSA_CHECK(!a.exclusive || a.z.data || backward, "XSA attention needs z");
  XSA_CHECK(!a.alpha || a.exclusive, "an exclusion strength (alpha) without XSA");
  if (backward) {
    XSA_CHECK(a.dqkv && a.d_out && a.lse, "attention backward needs dqkv, d_out and lse");
    XSA_CHECK(!a.alpha || a.dalpha, "gated XSA backward needs dalpha");
    XSA_CHECK(!a.sink || a.dsink, "attention backward with sinks needs dsink");
  }
}

// What the tiles of one attention call share: the shape, grouped-query heads (Hkv key/value heads;
// query head h reads kv head h / group) and the layout of qkv's rows.
template <typename Real>
struct AttentionPlan {
  const AttentionArgs<Real>& args;
  int Hk, group, D, Ck, ld;
  Real scale;
  bool bf16;  // bf16 tile products
  int D2;     // D in pairs of columns
  AttentionPlan(const AttentionArgs<Real>& a, Storage tile_products)
      : args(a),
        Hk(a.Hkv > 0 ? a.Hkv : a.H),
        group(a.H / Hk),
        D(a.C / a.H),
        Ck(Hk * D),
        ld(a.C + 2 * Ck),
        scale(Real(1) / std::sqrt(Real(D))),
        bf16(kIsFloat<Real> && tile_products == Storage::bf16),
        D2((D + 1) / 2) {}
};

// Each (sequence, kv head)'s keys and values packed once for all the query tiles that read them:
// kᵀ per key tile and v's rows (fp32 and float64 tiles, in `reals`), or kᵀ and v as pairs of rows
// (bf16 tiles, in `words`); `per_head` elements per (sequence, kv head), v after `kt_size`.
template <typename Real>
struct PackedKeysValues {
  size_t kt_size = 0, per_head = 0;
  const Real* reals = nullptr;
  const Word* words = nullptr;
};

// Each (sequence, kv head)'s keys and values (rows ld apart) handed to pack(keys, values, out),
// which fills per_head elements at out; the store is kept by the calling thread.
template <typename Element, typename Real, typename Pack>
const Element* pack_every_head(const AttentionPlan<Real>& p, size_t per_head, Pack pack) {
  const AttentionArgs<Real>& a = p.args;
  thread_local std::vector<Element> store;
  const size_t n = (size_t)a.B * p.Hk * per_head;
  if (store.size() < n) store.resize(n);
  Element* out = store.data();  // the calling thread's store: the team writes it through this
#pragma omp parallel for collapse(2)
  for (int b = 0; b < a.B; b++)
    for (int g = 0; g < p.Hk; g++) {
      const Real* keys = a.qkv + (size_t)b * a.T * p.ld + a.C + g * p.D;
      pack(keys, keys + p.Ck, out + (b * p.Hk + g) * per_head);
    }
  return out;
}

template <typename Real>
PackedKeysValues<Real> pack_keys_and_values(const AttentionPlan<Real>& p) {
  const int T = p.args.T, D = p.D, ld = p.ld;
  PackedKeysValues<Real> packed;
  if (!p.bf16) {
    const size_t kt_size = packed.kt_size = tiles_transposed_size<Real>(T, D);
    packed.per_head = kt_size + (size_t)T * D;
    packed.reals =
        pack_every_head<Real>(p, packed.per_head, [&](const Real* k, const Real* v, Real* out) {
          pack_tiles_transposed(k, T, D, ld, out);
          copy_rows(out + kt_size, D, v, ld, T, D);
        });
  } else if constexpr (kIsFloat<Real>) {
    const size_t kt_size = packed.kt_size = transposed_words(T, D);
    packed.per_head = kt_size + row_pair_words(T, D);
    packed.words =
        pack_every_head<Word>(p, packed.per_head, [&](const float* k, const float* v, Word* out) {
          pack_transposed(k, T, D, ld, out);
          pack_row_pairs(v, T, D, ld, out + kt_size, D);
        });
  }
  return packed;
}

// Each row's sum of exps is kept as kSumLanes partial sums (lane j: the columns ≡ j mod kSumLanes),
// added up once at the end of the row's key tiles: adding a tile's exps into one number per tile
// was a serial chain of scalar additions that cost more than the tile's q·kᵀ at D 32.
constexpr int kSumLanes = 16;
static_assert(kKeyTile % kSumLanes == 0);

// Online softmax over one tile of scores S (rows × cols): each row's running max m raised to the
// tile's, what the partial sums l and acc hold rescaled to it, the tile's scores turned into their
// exps in place (0 for keys the row may not see) and added to l. One pass per row while it is in
// the cache.
template <bool kAllVisible, typename Real>
inline void online_softmax_row(Real* s, int cols, int visible, Real& m, Real* lr, Real* acc,
                               int D) {
  // kAllVisible: every key of a whole tile visible (most tiles at long context): loops of a fixed
  // length and no masks.
  const int n = kAllVisible ? kKeyTile : cols;
  const Real new_max = max_of(s, kAllVisible ? kKeyTile : visible, m);
  if (new_max == -std::numeric_limits<Real>::infinity()) {  // no visible key yet
    std::fill(s, s + n, Real(0));
    return;
  }
  if (m != new_max) {
    const Real correction = fast_exp(m - new_max);
#pragma omp simd
    for (int j = 0; j < kSumLanes; j++) lr[j] *= correction;
    for (int d = 0; d < D; d++) acc[d] *= correction;
    m = new_max;
  }
  Real part[kSumLanes];  // in registers while the exps are written (s might alias lr)
  std::copy(lr, lr + kSumLanes, part);
#pragma GCC unroll 4
  for (int c0 = 0; c0 < n; c0 += kSumLanes) {  // the row holds kKeyTile, a multiple of these
#pragma omp simd
    for (int j = 0; j < kSumLanes; j++) {
      const int c = c0 + j;
      const Real e = kAllVisible || c < visible ? fast_exp(s[c] - new_max) : Real(0);
      s[c] = e;
      part[j] += e;
    }
  }
  std::copy(part, part + kSumLanes, lr);
}

// A query tile's running softmax: per row its maximum m, its kSumLanes partial sums l and its
// output accumulator acc (D wide).
template <typename Real>
struct SoftmaxRows {
  Real *m, *l, *acc;
  int D;
};

// The tile's scores S (rows × cols, from query i0 and key j0) turned into exps in place, each row's
// running softmax carried on.
template <typename Real>
void online_softmax_tile(Real* S, int rows, int cols, int i0, int j0, bool no_self,
                         const SoftmaxRows<Real>& run) {
  const int D = run.D;
  for (int r = 0; r < rows; r++) {
    Real* s = S + (size_t)r * kKeyTile;
    Real *lr = run.l + (size_t)r * kSumLanes, *acc_r = run.acc + (size_t)r * D;
    Real* m = run.m;
    const int visible = visible_keys(cols, i0 + r, j0, no_self);
    if (visible == kKeyTile)
      online_softmax_row<true>(s, cols, visible, m[r], lr, acc_r, D);
    else
      online_softmax_row<false>(s, cols, visible, m[r], lr, acc_r, D);
  }
}

// One query tile of one (sequence, head): its rows of y and their log-sum-exp, over every key tile
// it sees, from its kv head's packed keys and values.
template <typename Real>
void forward_query_tile(const AttentionPlan<Real>& p, const PackedKeysValues<Real>& packed, int b,
                        int h, int i0) {
  const AttentionArgs<Real>& a = p.args;
  const int T = a.T, C = a.C, D = p.D, D2 = p.D2, ld = p.ld, rows = std::min(kQueryTile, T - i0);
  const Real* Q = a.qkv + ((size_t)b * T + i0) * ld + h * D;
  const size_t head = (size_t)b * p.Hk + h / p.group;
  const Real* kt = packed.reals ? packed.reals + head * packed.per_head : nullptr;
  const Word* kt_words = packed.words ? packed.words + head * packed.per_head : nullptr;
  Real* S = scratch<Real>((size_t)kQueryTile * kKeyTile, 0);
  Word* q_words = p.bf16 ? word_scratch((size_t)kQueryTile * D2, 0) : nullptr;
  Word* p_words = p.bf16 ? word_scratch((size_t)kQueryTile * kKeyTile / 2, 1) : nullptr;
  if constexpr (kIsFloat<Real>)
    if (p.bf16) pack_column_pairs(Q, rows, D, ld, q_words, D2, 1);
  Real* acc = scratch<Real>((size_t)kQueryTile * D, 1);
  Real* m = scratch<Real>((size_t)kQueryTile * (1 + kSumLanes), 2);
  Real* l = m + kQueryTile;  // each row's kSumLanes partial sums
  std::fill(acc, acc + (size_t)rows * D, Real(0));
  // A sink starts every row with its logit and exp(b − b) = 1 in the sum; its value is zero.
  std::fill(m, m + rows, a.sink ? a.sink[h] : -std::numeric_limits<Real>::infinity());
  std::fill(l, l + (size_t)rows * kSumLanes, Real(0));
  if (a.sink)
    for (int r = 0; r < rows; r++) l[(size_t)r * kSumLanes] = 1;
  for (int j0 = 0; j0 < i0 + rows; j0 += kKeyTile) {
    const int cols = std::min(kKeyTile, i0 + rows - j0);
    if (!p.bf16)  // S = Q Kᵀ/√D
      tile_product(rows, cols, D, {Q, (size_t)ld, 1, kt + (size_t)j0 * D, kKeyTile, S, kKeyTile},
                   p.scale, false);
    else if constexpr (kIsFloat<Real>)
      tile_product_bf16(rows, cols, D2,
                        {q_words, (size_t)D2, 1, kt_words + j0, (size_t)T, S, kKeyTile}, p.scale,
                        false);
    online_softmax_tile(S, rows, cols, i0, j0, a.no_self, SoftmaxRows<Real>{m, l, acc, D});
    if (!p.bf16) {  // acc += P V
      const Real* V = kt + packed.kt_size + (size_t)j0 * D;
      tile_product(rows, D, cols, {S, kKeyTile, 1, V, (size_t)D, acc, (size_t)D}, Real(1), true);
    } else if constexpr (kIsFloat<Real>) {
      const Word* v_rows = kt_words + packed.kt_size;
      pack_column_pairs(S, rows, cols, kKeyTile, p_words, kKeyTile / 2, 1);
      tile_product_bf16(
          rows, D, (cols + 1) / 2,
          {p_words, kKeyTile / 2, 1, v_rows + (size_t)j0 / 2 * D, (size_t)D, acc, (size_t)D}, 1.0f,
          true);
    }
  }
  for (int r = 0; r < rows; r++) {
    const int i = i0 + r;
    Real* yi = a.y + ((size_t)b * T + i) * C + h * D;
    Real sum = 0;
    for (int j = 0; j < kSumLanes; j++) sum += l[(size_t)r * kSumLanes + j];
    const Real inv_l = sum > Real(0) ? Real(1) / sum : Real(0);  // no key seen (no-self): 0
    for (int d = 0; d < D; d++) yi[d] = acc[(size_t)r * D + d] * inv_l;
    a.lse[((size_t)b * a.H + h) * T + i] = m[r] + std::log(sum);
  }
}

}  // namespace

template <typename Real>
void attention_forward(const AttentionArgs<Real>& args, Storage tile_products) {
  check_args(args, /*backward=*/false);
  const AttentionPlan<Real> plan(args, tile_products);
  const int B = args.B, T = args.T, H = args.H;
  const int q_tiles = (T + kQueryTile - 1) / kQueryTile, tasks = B * H * q_tiles;
  const PackedKeysValues<Real> packed = pack_keys_and_values(plan);
  // Later query tiles see more keys: hand them out first so the threads finish together.
#pragma omp parallel for schedule(dynamic, 1)
  for (int task = 0; task < tasks; task++) {
    const int qt = q_tiles - 1 - task % q_tiles, bh = task / q_tiles, b = bh / H, h = bh % H;
    forward_query_tile(plan, packed, b, h, qt * kQueryTile);
  }
  if (args.exclusive) XSA_LEVEL::xsa_forward(args);  // qualified: ADL finds the dispatcher too
}

template <typename Real>
void attention_forward_cached(const AttentionArgs<Real>& args, const KvCache<Real>& cache) {
  check_args(args, /*backward=*/false);
  XSA_CHECK(args.B == 1, "cached attention runs one sequence (B = 1), not {}", args.B);
  XSA_CHECK(!args.z.bf16(), "cached attention writes z in fp32");
  Real *y = args.y, *z = args.exclusive ? args.z.data : nullptr;
  const Real *qkv = args.qkv, *alpha = args.alpha, *sink = args.sink;
  const Real *k_cache = cache.k, *v_cache = cache.v;
  const int n = args.T, C = args.C, H = args.H, Hkv = args.Hkv;
  const int prefix = cache.prefix, slot0 = cache.slot0;
  const SlotSpan* spans = cache.spans;
  const int Hk = Hkv > 0 ? Hkv : H, group = H / Hk, D = C / H, Ck = Hk * D, ld = C + 2 * Ck;
  const Real scale = Real(1) / std::sqrt(Real(D));
#pragma omp parallel for schedule(dynamic, 1)
  for (int task = 0; task < n * H; task++) {
    const int r = task / H, h = task % H, kv = (h / group) * D;
    const Real* q = qkv + (size_t)r * ld + h * D;
    // Visible slots, in order: the prefix, the parent segment, the row's own segment up to itself;
    // each a run of consecutive slots.
    const SlotSpan span = spans ? spans[r] : SlotSpan{0, 0, prefix};
    const int self = slot0 + r;
    const int runs[3][2] = {{0, prefix},
                            {span.parent_begin, span.parent_end - span.parent_begin},
                            {span.first, self - span.first + (args.no_self ? 0 : 1)}};
    const int visible = runs[0][1] + runs[1][1] + runs[2][1];
    Real* p = scratch<Real>((size_t)visible, 0);
    for (int run = 0, j = 0; run < 3; run++) {
      const Real* k = k_cache + (size_t)runs[run][0] * Ck + kv;
      for (int i = 0; i < runs[run][1]; i++, j++, k += Ck) {
        Real dot = 0;
#pragma omp simd reduction(+ : dot)
        for (int d = 0; d < D; d++) dot += q[d] * k[d];
        p[j] = dot * scale;
      }
    }
    const Real mx = max_of(p, visible, sink ? sink[h] : -std::numeric_limits<Real>::infinity());
    Real sum = sink ? fast_exp(sink[h] - mx) : Real(0);  // the sink's value vector is zero
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < visible; j++) {
      p[j] = fast_exp(p[j] - mx);
      sum += p[j];
    }
    Real* yr = y + (size_t)r * C + h * D;
    std::fill(yr, yr + D, Real(0));
    for (int run = 0, j = 0; run < 3; run++) {
      const Real* v = v_cache + (size_t)runs[run][0] * Ck + kv;
      for (int i = 0; i < runs[run][1]; i++, j++, v += Ck) {
        const Real pj = p[j];
#pragma omp simd
        for (int d = 0; d < D; d++) yr[d] += pj * v[d];
      }
    }
    const Real inv = sum > Real(0) ? Real(1) / sum : Real(0);  // no key seen (no-self): y = 0
    for (int d = 0; d < D; d++) yr[d] *= inv;
    if (z)  // XSA: the own value is the cache entry this row just wrote
      xsa_row_forward(z + (size_t)r * C + h * D, yr, v_cache + (size_t)self * Ck + kv, D,
                      alpha ? alpha[h] : Real(1));
  }
}

namespace {

// One (sequence, kv head) of the backward: its thread's scratch, the task-local gradients and, with
// bf16 tiles, its operands packed once: kᵀ, vᵀ and k as pairs of rows; each query tile's q and dy
// (both ways), and per tile p and ds: as pairs of columns (an A operand) or of rows (a transposed
// A, or a B).
template <typename Real>
struct BackwardTask {
  int b = 0, g = 0;
  const Real* base = nullptr;  // the sequence's qkv rows
  Real* dbase = nullptr;       // and their gradient
  Real *Di = nullptr, *P = nullptr, *dS = nullptr, *dK_acc = nullptr, *dV_acc = nullptr,
       *dQ_acc = nullptr, *dK_rows = nullptr, *dV_rows = nullptr;
  // fp32 and float64 tiles: kᵀ and vᵀ per key tile, k, and the query tile's q and dy as rows
  Real *kt_tiles = nullptr, *vt_tiles = nullptr, *k_copy = nullptr, *q_copy = nullptr,
       *dy_copy = nullptr;
  Word *kt = nullptr, *vt = nullptr, *k_rows = nullptr, *q_words = nullptr, *q_rows = nullptr,
       *dy_words = nullptr, *dy_rows = nullptr, *p_rows = nullptr, *ds_words = nullptr,
       *ds_rows = nullptr;
};

template <typename Real>
BackwardTask<Real> start_backward_task(const AttentionPlan<Real>& p, int b, int g) {
  const AttentionArgs<Real>& a = p.args;
  const int T = a.T, C = a.C, D = p.D, ld = p.ld, Q2 = kQueryTile / 2;
  BackwardTask<Real> t;
  t.b = b, t.g = g;
  t.base = a.qkv + (size_t)b * T * ld;
  t.dbase = a.dqkv + (size_t)b * T * ld;
  t.Di = scratch<Real>((size_t)T, 0);
  t.P = scratch<Real>((size_t)kQueryTile * kKeyTile, 1);
  t.dS = scratch<Real>((size_t)kQueryTile * kKeyTile, 2);
  // The tiles accumulate into contiguous task-local gradients that start from what dqkv holds
  // (zeros when it is written, XSA's own-value gradient in v) and go back into it at the end:
  // accumulating straight into dqkv's rows (3C apart) waited on their loads. The additions are
  // those into dqkv, in the same order, so the result is the same to the bit.
  t.dK_acc = scratch<Real>((size_t)2 * T * D, 3);
  t.dV_acc = t.dK_acc + (size_t)T * D;
  t.dQ_acc = scratch<Real>((size_t)kQueryTile * D, 4);
  t.dK_rows = t.dbase + C + g * D;
  t.dV_rows = t.dbase + C + p.Ck + g * D;
  start_rows(t.dK_acc, t.dK_rows, ld, T, D, !a.write_dqkv);
  start_rows(t.dV_acc, t.dV_rows, ld, T, D, !a.write_dqkv || a.exclusive);
  if (!p.bf16) {
    const size_t kv_t = tiles_transposed_size<Real>(T, D);
    t.kt_tiles = scratch<Real>(2 * kv_t + (size_t)T * D, 5);
    t.vt_tiles = t.kt_tiles + kv_t, t.k_copy = t.vt_tiles + kv_t;
    pack_tiles_transposed(t.base + C + g * D, T, D, ld, t.kt_tiles);
    pack_tiles_transposed(t.base + C + p.Ck + g * D, T, D, ld, t.vt_tiles);
    copy_rows(t.k_copy, D, t.base + C + g * D, ld, T, D);
    t.q_copy = scratch<Real>(2 * (size_t)kQueryTile * D, 6);
    t.dy_copy = t.q_copy + (size_t)kQueryTile * D;
  }
  if constexpr (kIsFloat<Real>) {
    if (p.bf16) {
      const size_t kv_t = transposed_words(T, D);
      t.kt = word_scratch(2 * kv_t + row_pair_words(T, D), 0);
      t.vt = t.kt + kv_t, t.k_rows = t.vt + kv_t;
      pack_transposed(t.base + C + g * D, T, D, ld, t.kt);
      pack_transposed(t.base + C + p.Ck + g * D, T, D, ld, t.vt);
      pack_row_pairs(t.base + C + g * D, T, D, ld, t.k_rows, D);
      t.q_words = word_scratch(2 * (size_t)kQueryTile * p.D2 + 2 * (size_t)Q2 * D, 1);
      t.q_rows = t.q_words + (size_t)kQueryTile * p.D2, t.dy_words = t.q_rows + (size_t)Q2 * D;
      t.dy_rows = t.dy_words + (size_t)kQueryTile * p.D2;
      t.p_rows = word_scratch(3 * (size_t)Q2 * kKeyTile, 2);
      t.ds_words = t.p_rows + (size_t)Q2 * kKeyTile, t.ds_rows = t.ds_words + (size_t)Q2 * kKeyTile;
    }
  }
  return t;
}

// Head h's D_i = dy_i·y_i for every row, and (with a sink) ∂L/∂b_h: the sink's p_sink =
// exp(b_h − lse_i) with value zero gives −Σ_i p_sink D_i.
// Each row's dy_i·y_i, summed in order over d with fused multiply-adds: the same bits at every
// level (tests/levels_test.cpp) whichever of the two paths a row takes. One row at a time it was a
// chain of dependent additions, about a tenth of the backward at T 256; transposed squares of W
// rows sum W rows at once, one lane each.
template <typename Real>
void row_dots(const Real* dy, const Real* y, int ld, int T, int D, Real* out) {
  int i = 0;
  if constexpr (kIsFloat<Real>) {
    constexpr int W = kTransposeWidth;
    if (D % W == 0) {
      alignas(64) float a[W * W], b[W * W];
      for (; i + W <= T; i += W) {
        float s[W] = {};
        for (int d0 = 0; d0 < D; d0 += W) {
          transpose_square(dy + (size_t)i * ld + d0, ld, a, W);  // a[k·W + r] = dy(i + r, d0 + k)
          transpose_square(y + (size_t)i * ld + d0, ld, b, W);
          for (int k = 0; k < W; k++)
#pragma omp simd
            for (int r = 0; r < W; r++) s[r] = std::fma(a[k * W + r], b[k * W + r], s[r]);
        }
        std::copy(s, s + W, out + i);
      }
    }
  }
  for (; i < T; i++) {
    Real s = 0;
    for (int d = 0; d < D; d++) s = std::fma(dy[(size_t)i * ld + d], y[(size_t)i * ld + d], s);
    out[i] = s;
  }
}

template <typename Real>
void row_dots_and_sink(const AttentionPlan<Real>& p, BackwardTask<Real>& t, int h) {
  const AttentionArgs<Real>& a = p.args;
  const int T = a.T, C = a.C, D = p.D;
  const size_t head = (size_t)t.b * T * C + h * D;
  row_dots(a.d_out + head, a.y + head, C, T, D, t.Di);
  if (a.sink) {
    const Real* row_lse = a.lse + ((size_t)t.b * a.H + h) * T;
    Real sum = 0;
    for (int i = 0; i < T; i++) sum -= std::exp(a.sink[h] - row_lse[i]) * t.Di[i];
    a.dsink[(size_t)t.b * a.H + h] = sum;
  }
}

// One query tile (rows i0 …) of head h against every key tile it sees: P recomputed from the
// log-sum-exp, dV += Pᵀ dY, dS = P ∘ (dY Vᵀ − D_i)/√D, dQ += dS K, dK += dSᵀ Q.
template <typename Real>
void backward_query_tile(const AttentionPlan<Real>& p, BackwardTask<Real>& t, int h, int i0) {
  const AttentionArgs<Real>& a = p.args;
  const int T = a.T, C = a.C, D = p.D, D2 = p.D2, ld = p.ld, K2 = kKeyTile / 2;
  const int rows = std::min(kQueryTile, T - i0), rows2 = (rows + 1) / 2;
  const Real scale = p.scale;
  const Real* row_lse = a.lse + ((size_t)t.b * a.H + h) * T;
  const Real* Q = t.base + (size_t)i0 * ld + h * D;
  Real *dQ = t.dQ_acc, *P = t.P, *dS = t.dS;
  Real* dQ_rows = t.dbase + (size_t)i0 * ld + h * D;
  start_rows(dQ, dQ_rows, ld, rows, D, !a.write_dqkv);
  const Real* dY = a.d_out + ((size_t)t.b * T + i0) * C + h * D;
  if (!p.bf16) {
    copy_rows(t.q_copy, D, Q, ld, rows, D);
    copy_rows(t.dy_copy, D, dY, C, rows, D);
  }
  if constexpr (kIsFloat<Real>) {
    if (p.bf16) {
      pack_column_pairs(Q, rows, D, ld, t.q_words, D2, 1);
      pack_row_pairs(Q, rows, D, ld, t.q_rows, D);
      pack_column_pairs(dY, rows, D, C, t.dy_words, D2, 1);
      pack_row_pairs(dY, rows, D, C, t.dy_rows, D);
    }
  }
  for (int j0 = 0; j0 < i0 + rows; j0 += kKeyTile) {
    const int cols = std::min(kKeyTile, i0 + rows - j0), cols2 = (cols + 1) / 2;
    const size_t dd = D;
    Real* dK = t.dK_acc + (size_t)j0 * D;
    Real* dV = t.dV_acc + (size_t)j0 * D;
    if (!p.bf16) {
      const Real *Kt = t.kt_tiles + (size_t)j0 * D, *Vt = t.vt_tiles + (size_t)j0 * D;
      tile_product(rows, cols, D, {t.q_copy, dd, 1, Kt, kKeyTile, P, kKeyTile}, scale, false);
      exp_tile(P, rows, cols, i0, j0, row_lse + i0, a.no_self);                             // P
      tile_product(cols, D, rows, {P, 1, kKeyTile, t.dy_copy, dd, dV, dd}, Real(1), true);  // Pᵀ dY
      tile_product(rows, cols, D, {t.dy_copy, dd, 1, Vt, kKeyTile, dS, kKeyTile}, Real(1),
                   false);  // dY Vᵀ
    } else if constexpr (kIsFloat<Real>) {
      tile_product_bf16(rows, cols, D2,
                        {t.q_words, (size_t)D2, 1, t.kt + j0, (size_t)T, P, kKeyTile}, scale,
                        false);
      exp_tile(P, rows, cols, i0, j0, row_lse + i0, a.no_self);
      pack_row_pairs(P, rows, cols, kKeyTile, t.p_rows, kKeyTile);
      tile_product_bf16(cols, D, rows2, {t.p_rows, 1, kKeyTile, t.dy_rows, dd, dV, dd}, 1.0f, true);
      tile_product_bf16(rows, cols, D2,
                        {t.dy_words, (size_t)D2, 1, t.vt + j0, (size_t)T, dS, kKeyTile}, 1.0f,
                        false);
    }
    for (int r = 0; r < rows; r++) {
      const Real d_row = t.Di[i0 + r];
      Real* ds = dS + (size_t)r * kKeyTile;
      const Real* pr = P + (size_t)r * kKeyTile;
#pragma omp simd
      for (int c = 0; c < cols; c++) ds[c] = pr[c] * (ds[c] - d_row) * scale;
    }
    if (!p.bf16) {
      const Real* K = t.k_copy + (size_t)j0 * D;
      tile_product(rows, D, cols, {dS, kKeyTile, 1, K, dd, dQ, dd}, Real(1), true);  // += dS K
      tile_product(cols, D, rows, {dS, 1, kKeyTile, t.q_copy, dd, dK, dd}, Real(1), true);  // dSᵀ Q
    } else if constexpr (kIsFloat<Real>) {
      pack_column_pairs(dS, rows, cols, kKeyTile, t.ds_words, K2, 1);
      pack_row_pairs(dS, rows, cols, kKeyTile, t.ds_rows, kKeyTile);
      tile_product_bf16(rows, D, cols2,
                        {t.ds_words, (size_t)K2, 1, t.k_rows + (size_t)j0 / 2 * D, dd, dQ, dd},
                        1.0f, true);
      tile_product_bf16(cols, D, rows2, {t.ds_rows, 1, kKeyTile, t.q_rows, dd, dK, dd}, 1.0f, true);
    }
  }
  copy_rows(dQ_rows, ld, dQ, D, rows, D);
}

}  // namespace

template <typename Real>
void attention_backward(const AttentionArgs<Real>& args, Storage tile_products) {
  check_args(args, /*backward=*/true);
  // forward: s_ij = q_i·k_j/√D, p_ij = exp(s_ij − lse_i), y_i = Σ_j p_ij v_j.
  //   dv_j += p_ij dy_i;  dp_ij = dy_i·v_j;  ds_ij = p_ij (dp_ij − D_i) with D_i = dy_i·y_i;
  //   dq_i += ds_ij k_j/√D;  dk_j += ds_ij q_i/√D.
  // One (b, kv head) per task, its query heads in turn: every write of a task stays inside its own
  // key/value head (shared by the group under GQA), so no races, and the summation order is fixed
  // whatever the thread count.
  const AttentionPlan<Real> plan(args, tile_products);
  const int B = args.B, T = args.T;
  // ∂L/∂z → ∂L/∂y, and the own-value gradient (written into dqkv's v with write_dqkv).
  if (args.exclusive) XSA_LEVEL::xsa_backward(args);
#pragma omp parallel for collapse(2) schedule(dynamic, 1)
  for (int b = 0; b < B; b++) {
    for (int g = 0; g < plan.Hk; g++) {
      BackwardTask<Real> task = start_backward_task(plan, b, g);
      for (int h = g * plan.group; h < (g + 1) * plan.group; h++) {
        row_dots_and_sink(plan, task, h);
        for (int i0 = 0; i0 < T; i0 += kQueryTile) backward_query_tile(plan, task, h, i0);
      }
      copy_rows(task.dK_rows, plan.ld, task.dK_acc, plan.D, T, plan.D);
      copy_rows(task.dV_rows, plan.ld, task.dV_acc, plan.D, T, plan.D);
    }
  }
}

#define XSA_INSTANTIATE(Real)                                                  \
  template void attention_forward<Real>(const AttentionArgs<Real>&, Storage);  \
  template void attention_backward<Real>(const AttentionArgs<Real>&, Storage); \
  template void attention_forward_cached<Real>(const AttentionArgs<Real>&, const KvCache<Real>&);
XSA_INSTANTIATE(float)
XSA_INSTANTIATE(double)

}  // namespace xsa::ops::XSA_LEVEL
XSA_LEVEL_END
