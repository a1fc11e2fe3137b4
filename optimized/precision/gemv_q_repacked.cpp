// GEMV, precision lever, rung 6: repacked weights (fp32_repacked,
// bf16_dot_repacked, int8_dot_repacked, int4_gG_{sym,asym}_dot_repacked).
// (The whole ladder is listed in reference/precision/gemv_q.hpp.)
//
// Change from rung 5 (and, for fp32, rung 1): the weights are rearranged
// once, when they are loaded (prepare(), untimed), into panels of 16 rows in
// which each 32-bit lane of a 512-bit register holds one row's next 1 (fp32),
// 2 (bf16), 4 (int8) or 8 (int4, two nibbles per byte) weights:
//     panel p, step t:  64 bytes = [row 0: k..k+3][row 1: k..k+3]...[row 15]   (int8)
// The inner loop then needs no horizontal sum and no per-row bookkeeping: one
// 64-byte load feeds 16 rows, x arrives as a 4-byte broadcast (1, 2 or 4
// activations) from L1, and the 16 row sums stay in one register to the end.
// int4 unpacking is two ops per 128 weights (AND, shift+AND), shared by all
// batch items; every batch item (up to 8 at once) reuses each loaded
// register, so W is read once per call for b <= 8 and the extra work per item
// is one vpdpbusd / vdpbf16ps / FMA per load.
// Scales live beside their panel ([panel][group][16 rows], fp16 for int4), so
// the bytes streamed are the same as rungs 1-5's: weight bytes per call are
// unchanged, the instructions per weight fall again. Expected effect: every
// format's b = 1 time reaches bytes / read bandwidth, and b = 8 costs little
// more than b = 1 (int4 at b = 8 is ~8 vpdpbusd per 64 bytes: about the
// VNNI peak, still near the memory time).
// x is rearranged to match once per call: [k step][batch item] (one cache
// line serves the broadcasts of up to 16 items); at b = 1 that is x itself.
// bf16 takes vdpbf16ps only where that instruction does at least the fp32
// FMAs' FLOP per second; on the Xeon of results/xeon-260m-kvm-2c, which
// issues it at a quarter of the FMA rate (half their FLOP per second), the
// same panels are widened to fp32 and multiplied with FMAs: b = 8 at 8192^2
// 5.22 ms against vdpbf16ps's 5.70, b = 1 unchanged (memory-bound either way;
// results/xeon-260m-kvm-2c/precision-gemv-bf16-{fma,dot}.json)
// (measured once per process; MEMWALL_BF16=dot|fma forces either; the row's
// `path` names the one that ran).
// AVX2 fallback: the same panels, read as two halves of 8 rows (vpmaddubsw +
// vpmaddwd for int, widen + FMA for bf16), each half swept on its own over a
// short stretch of k, so that b = 8 needs 8 accumulators per sweep, not 16
// (AVX2 has 16 registers; see the AVX2 section). Numerics: as rung 5 (fp32: as
// rung 1), except the integer formats' x, which is int8 per block of 256 (a
// whole number of int4 groups, as llama.cpp's Q8_K) rather than per group
// (int4) or per 32 (int8): at b = 8 the loop is bound by vector-op
// throughput (vpdpbusd shares the pipes with the FMAs), and the per-block
// tail (a conversion and one or two FMAs per item) then comes once per 256
// inputs. int4, with its zero point folded into the int32 accumulator's
// start, then costs each item a conversion and one FMA per group instead of
// three ops: b = 8 ~10% faster (1.91 -> 1.74 ms at 8192^2, G = 32). int8's
// tail came every 8 steps of 8 vpdpbusd: b = 8 at 8192^2 1.73 -> 1.43 ms
// (best of 6 interleaved rounds in one process, the Zen 4 EPYC of
// results/epyc-kvm-2c, --cold; per 64: 1.56), b = 1 unchanged. The price:
// one scale per 256 inputs of x instead of per 32 or 64 (an outlier in x
// coarsens the rounding of its whole block); the contract oracle rounds x
// the same way.
#include "harness/ceilings.hpp"
#include "harness/inputs.hpp"
#include "kernels/precision/gemv.hpp"
#include "optimized/precision/gemv_q_cpu.hpp"

namespace mw::precision {

double PackedMatrix::bytes() const {
    return double(w.size_bytes()) + double(scales.size_bytes()) + double(zeros.size_bytes());
}

namespace {

constexpr int kRows = 16;  // rows per panel: 16 lanes of 32 bits
constexpr int kActBlock = 256;  // int8, int4: x's int8 block, a multiple of every group (32, 64, 128)

enum class Kind { f32, bf16, i8, i4 };
Kind kind_of(const QuantSpec& s) {
    switch (s.format) {
        case Format::f32: return Kind::f32;
        case Format::bf16: return Kind::bf16;
        case Format::int8_channel: return Kind::i8;
        case Format::int4: return Kind::i4;
        default: break;
    }
    throw std::invalid_argument("repack: no repacked rung for " + describe(s) + " (choices: f32, bf16, int8_channel, int4)");
}
// Weights per 32-bit lane, i.e. k per 64-byte step.
int per_lane(Kind k) { return k == Kind::f32 ? 1 : k == Kind::bf16 ? 2 : k == Kind::i8 ? 4 : 8; }

}  // namespace

namespace cpu {
ActSpec repacked_acts(const QuantSpec& w) {
    if (w.format == Format::f32) return {};
    if (w.format == Format::int4) return {ActRound::int8, std::max(kActBlock, w.group)};
    if (w.format == Format::int8_channel) return {ActRound::int8, kActBlock};
    return dot_acts(w);
}
}  // namespace cpu

PackedMatrix repack(const QMatrix& m) {
    const Kind kind = kind_of(m.spec);
    PackedMatrix P;
    P.spec = m.spec;
    P.acts = cpu::repacked_acts(m.spec);
    P.n_out = m.n_out, P.n_in = m.n_in;
    P.kp = kind == Kind::i4 ? m.ld : (m.n_in + 31) / 32 * 32;
    P.panels = (m.n_out + kRows - 1) / kRows;
    const int L = per_lane(kind);
    const std::int64_t steps = P.kp / L, panel_bytes = steps * 64;
    P.w = Buffer::make("W_repacked", DType::u8, std::size_t(P.panels * panel_bytes));
    const std::int64_t groups = kind == Kind::i4 ? m.groups_per_row : 0;
    if (kind == Kind::i8) P.scales = Buffer::make("scale_f32", DType::f32, std::size_t(P.panels * kRows));
    if (kind == Kind::i4) P.scales = Buffer::make("scale_f16", DType::f16, std::size_t(P.panels * groups * kRows));
    if (kind == Kind::i4 && m.spec.asym) P.zeros = Buffer::make("zero_f16", DType::f16, std::size_t(P.panels * groups * kRows));
#pragma omp parallel for schedule(static)
    for (std::int64_t p = 0; p < P.panels; ++p) {
        std::uint8_t* pw = P.w.as<std::uint8_t>() + p * panel_bytes;
        std::memset(pw, 0, std::size_t(panel_bytes));
        for (int r = 0; r < kRows; ++r) {
            const std::int64_t i = p * kRows + r;
            const bool real = i < m.n_out;
            for (std::int64_t k = 0; k < P.kp; ++k) {
                std::uint8_t* lane = pw + (k / L) * 64 + r * 4;
                const bool in = real && k < m.n_in;
                switch (kind) {
                    case Kind::f32: {
                        const float v = in ? m.payload.as<float>()[i * m.ld + k] : 0.0f;
                        std::memcpy(lane, &v, 4);
                        break;
                    }
                    case Kind::bf16: {
                        const std::uint16_t v = in ? m.payload.as<std::uint16_t>()[i * m.ld + k] : 0;
                        std::memcpy(lane + 2 * (k % 2), &v, 2);
                        break;
                    }
                    case Kind::i8:  // q + 128: unsigned for vpdpbusd
                        lane[k % 4] = std::uint8_t((in ? m.payload.as<std::int8_t>()[i * m.ld + k] : 0) + 128);
                        break;
                    case Kind::i4: {  // lane byte j: weight k8+j low, k8+4+j high
                        const std::uint8_t c = real ? nibble_at(m.payload.as<std::uint8_t>() + i * (m.ld / 2), k) : 8;
                        lane[k % 4] |= std::uint8_t((k % 8) < 4 ? c : c << 4);
                        break;
                    }
                }
            }
            if (kind == Kind::i8) P.scales.as<float>()[p * kRows + r] = real ? m.scales.as<float>()[i] : 0.0f;
            for (std::int64_t g = 0; g < groups; ++g) {
                const std::size_t at = std::size_t((p * groups + g) * kRows + r);
                P.scales.as<std::uint16_t>()[at] = real ? m.scales.as<std::uint16_t>()[i * groups + g] : 0;
                if (m.spec.asym) P.zeros.as<std::uint16_t>()[at] = real ? m.zeros.as<std::uint16_t>()[i * groups + g] : 0;
            }
        }
    }
    return P;
}

namespace cpu {
namespace {

using Kind = precision::Kind;

// x for one call, in the panels' order: lane-sized units [k step][batch item].
struct PackedActs {
    DotActs nat;                     // rounded x, [b][kp] (rung 5's layout)
    std::vector<std::uint32_t> x32;  // [kp / per_lane][b] (int8: 4 q; bf16: 2 halves; f32: the float's bits)
    std::vector<float> d;            // int8: [act block][b] the blocks' scales
    std::vector<float> qs;           // int8: [zero-point group][b] sum of q (as float): per weight
                                     // group of G for int4, per act block for int8_channel
    std::vector<std::int32_t> q8;    // int4 sym: [group][b] -8 * sum of q, the zero point's share
    std::vector<float> xpad;         // f32 with n_in < kp: x zero-padded to [b][kp]
    std::vector<float> xw;           // bf16 on the FMA path: x's bf16 values widened, [k][b]
    const std::uint32_t* x = nullptr;
};

struct Args {
    const PackedMatrix* P;
    const PackedActs* X;
    std::int64_t b;
    float* y;
};

MW_TARGET_AVX512 inline void store_rows(const Args& a, std::int64_t p, std::int64_t bb, __m512 v) {
    const std::int64_t n = std::min<std::int64_t>(kRows, a.P->n_out - p * kRows);
    _mm512_mask_storeu_ps(a.y + bb * a.P->n_out + p * kRows, __mmask16(n == 16 ? 0xFFFF : (1u << n) - 1), v);
}
MW_TARGET_AVX2 inline void store_rows8(const Args& a, std::int64_t p, int h, std::int64_t bb, __m256 v) {
    alignas(32) float t[8];
    _mm256_store_ps(t, v);
    const std::int64_t r0 = p * kRows + 8 * h;
    for (int r = 0; r < 8 && r0 + r < a.P->n_out; ++r) a.y[bb * a.P->n_out + r0 + r] = t[r];
}

// --- AVX-512 (VNNI / BF16 / F) --------------------------------------------------

// Software prefetch along the panel stream: 8 KiB ahead into L2
// (prefetcht1). Only where it measured faster: the loops that do much work
// per 64-byte line (int4 from b = 2, bf16 from b = 4, fp32 and int8 at
// b = 8). The light loops run faster with the hardware prefetchers alone.
// On the Zen 4 EPYC of results/epyc-kvm-2c, 8192^2, --cold, 2 threads, best
// of 3 interleaved rounds in one process (prefetch against none):
//   b = 1: fp32 4.85-4.91 against 4.01-4.07 ms, bf16 2.62-3.01 against
//          2.06-2.11, int8 1.39-1.62 against 1.07, int4 G = 64 asym
//          0.81-0.85 against 0.71-0.72 (G = 32 sym: 0.83-0.85 against 0.78-0.80);
//   b = 2: fp32 5.67 against 4.66, bf16 3.03-3.87 against 2.28-2.36, int8
//          1.68-1.98 against 1.21-1.26; but int4 G = 32 0.83-0.84 against 0.86-0.92;
//   b = 4: bf16 2.22-2.27 against 2.50-2.65; fp32 5.78-5.89 against 4.90-4.93,
//          int8 1.43-1.46 against 1.36-1.42;
//   b = 8: fp32 5.04-5.05 against 5.91-5.95, bf16 2.56 against 3.23-3.29, int8
//          1.34-1.36 against 1.78-1.84.
// (An earlier A/B in separate processes had found int4 at b = 1 faster with
// it; on this host only same-process comparisons hold.)
inline void prefetch_ahead(const void* at) {
    __builtin_prefetch(static_cast<const char*>(at) + 2 * kPrefetchBytes, 0, 2);
}

// acc += dot(u8 quads of w, s8 quad x broadcast): vpdpbusd with a broadcast
// memory operand. Written as asm because GCC 12 copies the accumulator in
// and out of a scratch register around every _mm512_dpbusd_epi32. With it
// the int4 step is one load, three unpack ops and 2 x NB vpdpbusd with the
// x quad as an embedded broadcast: at b = 8 the loop is bound by vpdpbusd
// throughput (one 512-bit op per cycle on Zen 4), not by the copies.
MW_TARGET_AVX512_VNNI inline __m512i dpbusd_bcst(__m512i acc, __m512i w, const std::uint32_t* x) {
    asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*x));
    return acc;
}
// Independent accumulator chains: at least 4 per panel, so that the
// latency of an FMA or dot product (4-6 cycles) does not pace the loop.
// The fp32, bf16 and int8 loops step NA lines at a time, accumulator i
// taking line i, so that every index is a constant and each accumulator a
// register. (They indexed acc[t % NA], which GCC kept on the stack: a
// store-to-load forward per step, ~6 cycles per 64 bytes, ~25 GB/s per
// core, below DRAM's rate on the Zen 4 EPYC above. From L3, 2048^2 at
// b = 1: bf16 0.164-0.173 -> 0.060-0.065 ms, fp32 0.29-0.30 -> 0.12,
// int8 0.066-0.073 -> 0.031-0.035; from DRAM, 8192^2 --cold: bf16 2.74 ->
// 2.06-2.11 ms, fp32 4.95 -> 4.01-4.07, int8 1.17-1.20 -> 1.07; 18432^2:
// bf16 14.18 -> 11.04-11.12, fp32 24.9 -> 19.9-20.4, int8 5.76-5.99 ->
// 5.49-5.52; best of 3-4 interleaved rounds in one process. The old loops
// all ran at about DRAM's speed, which hid that they were the limit.)
// NA steps divide every loop's trip count: kp is a multiple of 32 (fp32,
// bf16) and int8's blocks are 64 steps, a partial last one a multiple of 8.
constexpr int chains_per_item(int nb) { return nb == 1 ? 4 : nb == 2 ? 2 : 1; }

// int4: y = sum over x's blocks B of d_B * sum over groups g in B of s_g * (I_g - z_g * qs_g),
// I_g the group's integer dot product. Sym: the zero point's -8 * qs_g is
// the int32 accumulator's starting value (a broadcast load, no vector op),
// so a group costs each batch item one conversion and one FMA by s_g, and
// the activation scale d_B is applied once per block of 256 (4 or 8
// groups): 2.1-2.3 vector ops per item and group instead of 3, which at
// b = 8 is ~8% of all the vector work (vpdpbusd included). Asym adds one
// FNMADD per item and group for z_g * qs_g.
template <bool ASYM, int NB>
MW_TARGET_AVX512_VNNI void panel_i4_vnni(const Args& a, std::int64_t p, std::int64_t b0) {
    constexpr int NA = NB <= 2 ? 2 : 1;
    const PackedMatrix& P = *a.P;
    const std::int64_t G = P.spec.group, groups = P.kp / G, per_block = P.acts.block / G, b = a.b;
    const std::uint8_t* w = P.w.as<std::uint8_t>() + p * (P.kp / 8) * 64;
    const std::uint16_t* sc = P.scales.as<std::uint16_t>() + p * groups * kRows;
    const std::uint16_t* zc = ASYM ? P.zeros.as<std::uint16_t>() + p * groups * kRows : nullptr;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 facc[NB], fblk[NB];
    for (int bb = 0; bb < NB; ++bb) facc[bb] = fblk[bb] = _mm512_setzero_ps();
    const std::uint32_t* xl = a.X->x + b0;  // x's quads k..k+3, then (xh) k+4..k+7, advanced by 2b per step
    const std::uint32_t* xh = xl + b;
    __m512i iacc[NB][NA];
    for (std::int64_t g = 0; g < groups; ++g) {
        for (int bb = 0; bb < NB; ++bb) {
            iacc[bb][0] = ASYM ? _mm512_setzero_si512() : _mm512_set1_epi32(a.X->q8[g * b + b0 + bb]);
            if (NA == 2) iacc[bb][NA - 1] = _mm512_setzero_si512();
        }
        for (std::int64_t t = 0; t < G / 8; ++t, w += 64, xl += 2 * b, xh += 2 * b) {
            if constexpr (NB >= 2) prefetch_ahead(w);
            const __m512i v = _mm512_loadu_si512(w);
            const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            for (int bb = 0; bb < NB; ++bb) {
                iacc[bb][0] = dpbusd_bcst(iacc[bb][0], lo, xl + bb);
                iacc[bb][NA - 1] = dpbusd_bcst(iacc[bb][NA - 1], hi, xh + bb);
            }
        }
        const __m512 s = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sc + g * kRows)));
        [[maybe_unused]] __m512 sz;
        if constexpr (ASYM)
            sz = _mm512_mul_ps(s, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(zc + g * kRows))));
        for (int bb = 0; bb < NB; ++bb) {
            const __m512i i = NA == 2 ? _mm512_add_epi32(iacc[bb][0], iacc[bb][1]) : iacc[bb][0];
            fblk[bb] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), s, fblk[bb]);
            if constexpr (ASYM) fblk[bb] = _mm512_fnmadd_ps(sz, _mm512_set1_ps(a.X->qs[g * b + b0 + bb]), fblk[bb]);
        }
        if ((g + 1) % per_block == 0 || g + 1 == groups) {
            const std::int64_t blk = g / per_block;
            for (int bb = 0; bb < NB; ++bb) {
                facc[bb] = _mm512_fmadd_ps(fblk[bb], _mm512_set1_ps(a.X->d[blk * b + b0 + bb]), facc[bb]);
                fblk[bb] = _mm512_setzero_ps();
            }
        }
    }
    for (int bb = 0; bb < NB; ++bb) store_rows(a, p, b0 + bb, facc[bb]);
}

template <int NB>
MW_TARGET_AVX512_VNNI void panel_i8_vnni(const Args& a, std::int64_t p, std::int64_t b0) {
    constexpr int NA = chains_per_item(NB);
    constexpr bool PF = NB >= 8;
    const PackedMatrix& P = *a.P;
    const std::int64_t blk = P.acts.block, blocks = (P.kp + blk - 1) / blk, b = a.b;  // the last block may be partial
    const std::uint8_t* w = P.w.as<std::uint8_t>() + p * (P.kp / 4) * 64;
    const std::uint32_t* x = a.X->x + b0;
    const float* qs = a.X->qs.data() + b0;
    const float* d = a.X->d.data() + b0;
    __m512 facc[NB];
    for (int bb = 0; bb < NB; ++bb) facc[bb] = _mm512_setzero_ps();
    for (std::int64_t g = 0; g < blocks; ++g) {
        __m512i iacc[NB][NA];
        for (int bb = 0; bb < NB; ++bb)
            for (int i = 0; i < NA; ++i) iacc[bb][i] = _mm512_setzero_si512();
        const std::int64_t steps = (std::min((g + 1) * blk, P.kp) - g * blk) / 4;
        for (std::int64_t t = 0; t < steps; t += NA, w += NA * 64, x += NA * b) {
#pragma GCC unroll 4
            for (int i = 0; i < NA; ++i) {
                if constexpr (PF) prefetch_ahead(w + 64 * i);
                const __m512i v = _mm512_loadu_si512(w + 64 * i);
#pragma GCC unroll 8
                for (int bb = 0; bb < NB; ++bb)
                    iacc[bb][i] = _mm512_dpbusd_epi32(iacc[bb][i], v, _mm512_set1_epi32(int(x[i * b + bb])));
            }
        }
        for (int bb = 0; bb < NB; ++bb) {
            __m512i s = iacc[bb][0];
            for (int i = 1; i < NA; ++i) s = _mm512_add_epi32(s, iacc[bb][i]);
            // the stored q + 128 added 128 * sum(q_x) to the block's sum
            const __m512 f = _mm512_sub_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(128.0f * qs[g * b + bb]));
            facc[bb] = _mm512_fmadd_ps(f, _mm512_set1_ps(d[g * b + bb]), facc[bb]);
        }
    }
    const __m512 rs = _mm512_loadu_ps(P.scales.as<float>() + p * kRows);
    for (int bb = 0; bb < NB; ++bb) store_rows(a, p, b0 + bb, _mm512_mul_ps(facc[bb], rs));
}

template <int NB>
MW_TARGET_AVX512_BF16 void panel_bf16_dot(const Args& a, std::int64_t p, std::int64_t b0) {
    constexpr int NA = chains_per_item(NB);
    constexpr bool PF = NB >= 4;
    const PackedMatrix& P = *a.P;
    const std::int64_t b = a.b, steps = P.kp / 2;
    const std::uint8_t* w = P.w.as<std::uint8_t>() + p * steps * 64;
    const std::uint32_t* x = a.X->x + b0;
    __m512 acc[NB][NA];
    for (int bb = 0; bb < NB; ++bb)
        for (int i = 0; i < NA; ++i) acc[bb][i] = _mm512_setzero_ps();
    for (std::int64_t t = 0; t < steps; t += NA, w += NA * 64, x += NA * b) {
#pragma GCC unroll 4
        for (int i = 0; i < NA; ++i) {
            if constexpr (PF) prefetch_ahead(w + 64 * i);
            const __m512bh v = (__m512bh)_mm512_loadu_si512(w + 64 * i);
#pragma GCC unroll 8
            for (int bb = 0; bb < NB; ++bb)
                acc[bb][i] = _mm512_dpbf16_ps(acc[bb][i], v, (__m512bh)_mm512_set1_epi32(int(x[i * b + bb])));
        }
    }
    for (int bb = 0; bb < NB; ++bb) {
        __m512 s = acc[bb][0];
        for (int i = 1; i < NA; ++i) s = _mm512_add_ps(s, acc[bb][i]);
        store_rows(a, p, b0 + bb, s);
    }
}

// bf16 without vdpbf16ps: each 64-byte load becomes two fp32 vectors (row
// weights k and k+1: a shift and an AND, shared by every batch item), each
// multiplied by x's widened bf16 value, broadcast from L1, with an FMA.
// Where vdpbf16ps issues at a quarter of the FMA rate (measured on
// Sapphire/Emerald Rapids Xeons: 0.45 per cycle against 1.8), that is 2 + 2b
// FMA-pipe ops per 64 bytes instead of b dot products at 4x the cost: at
// b = 8, 9 cycles instead of ~18, back under the memory time.
template <int NB>
MW_TARGET_AVX512 void panel_bf16_fma(const Args& a, std::int64_t p, std::int64_t b0) {
    const PackedMatrix& P = *a.P;
    const std::int64_t b = a.b;
    const std::uint8_t* w = P.w.as<std::uint8_t>() + p * (P.kp / 2) * 64;
    const float* xw = a.X->xw.data() + b0;  // [k][b]: k even, then k odd
    const __m512i top = _mm512_set1_epi32(int(0xFFFF0000u));
    __m512 acc[NB][2];
    for (int bb = 0; bb < NB; ++bb) acc[bb][0] = acc[bb][1] = _mm512_setzero_ps();
    for (std::int64_t t = 0; t < P.kp / 2; ++t, w += 64, xw += 2 * b) {
        prefetch_ahead(w);
        const __m512i v = _mm512_loadu_si512(w);
        const __m512 lo = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), hi = _mm512_castsi512_ps(_mm512_and_si512(v, top));
        for (int bb = 0; bb < NB; ++bb) {
            acc[bb][0] = _mm512_fmadd_ps(lo, _mm512_set1_ps(xw[bb]), acc[bb][0]);
            acc[bb][1] = _mm512_fmadd_ps(hi, _mm512_set1_ps(xw[b + bb]), acc[bb][1]);
        }
    }
    for (int bb = 0; bb < NB; ++bb) store_rows(a, p, b0 + bb, _mm512_add_ps(acc[bb][0], acc[bb][1]));
}

template <int NB>
MW_TARGET_AVX512 void panel_f32_avx512(const Args& a, std::int64_t p, std::int64_t b0) {
    constexpr int NA = chains_per_item(NB);
    constexpr bool PF = NB >= 8;
    const PackedMatrix& P = *a.P;
    const std::int64_t b = a.b;
    const float* w = P.w.as<float>() + p * P.kp * kRows;
    const float* xf = reinterpret_cast<const float*>(a.X->x) + b0;
    __m512 acc[NB][NA];
    for (int bb = 0; bb < NB; ++bb)
        for (int i = 0; i < NA; ++i) acc[bb][i] = _mm512_setzero_ps();
    for (std::int64_t k = 0; k < P.kp; k += NA, w += NA * kRows, xf += NA * b) {
#pragma GCC unroll 4
        for (int i = 0; i < NA; ++i) {
            if constexpr (PF) prefetch_ahead(w + i * kRows);
            const __m512 v = _mm512_loadu_ps(w + i * kRows);
#pragma GCC unroll 8
            for (int bb = 0; bb < NB; ++bb) acc[bb][i] = _mm512_fmadd_ps(v, _mm512_set1_ps(xf[i * b + bb]), acc[bb][i]);
        }
    }
    for (int bb = 0; bb < NB; ++bb) {
        __m512 s = acc[bb][0];
        for (int i = 1; i < NA; ++i) s = _mm512_add_ps(s, acc[bb][i]);
        store_rows(a, p, b0 + bb, s);
    }
}

// --- AVX2: the same panels as two halves of 8 rows --------------------------------
//
// AVX2 has 16 vector registers, not 32: b = 8 items x 2 halves would need 16
// accumulators before a single weight is loaded, and GCC spilled them. So
// each half is swept on its own (int: where b >= 4 per call; float: always,
// with 2-4 accumulators per item at b <= 4, but for bf16 at b = 8, whose
// sweeps take both halves and 4 items) over a short stretch of k: one
// zero-point group (int4), one block of x (int8) or kAvx2Stretch steps
// (float). The first sweep brings the stretch's 64-byte lines in from
// memory, the next finds them in L1, and every batch item needs one sum
// per half swept (int4 at b = 8: 8 16-bit sums, and 8 int32 sums beside them
// where a group spans several 4-step batches, which still spills a few).
// The float sums wait in a small array between stretches (a load, an add
// and a store per item and stretch). The floor stays higher than AVX-512's:
// with no vpdpbusd, int4 at b = 8 costs per 64-byte step 32 vpmaddubsw, 32
// 16-bit adds and 32 broadcasts of x on 4 vector pipes, ~24 cycles for those
// alone and ~30-35 with the unpacking, the widening vpmaddwd and the
// per-group tail, where memory delivers the step at b = 1 in ~18 (the Zen 3
// EPYC of results/epyc-zen3-kvm-2c). int8 needs ~20 plus its per-block tail
// against ~15, bf16's 32 FMAs 16 against ~14.
constexpr std::int64_t kAvx2Stretch = 32;  // float: steps per stretch (2 KiB of panel)
static_assert(kAvx2Stretch % 16 == 0, "a float panel's steps are a multiple of 16: every stretch but the last is whole");

// Writes the float sums [NB][2 halves][8 rows] to y.
template <int NB>
MW_TARGET_AVX2 void store_halves(const Args& a, std::int64_t p, std::int64_t b0, const float (&f)[NB][2][8]) {
    for (int h = 0; h < 2; ++h)
        for (int bb = 0; bb < NB; ++bb) store_rows8(a, p, h, b0 + bb, _mm256_load_ps(f[bb][h]));
}

// int4, HS halves (both for few items, else one), one group of `steps`
// 64-byte steps: iacc[bb][hs] += the group's integer dot products. The two
// nibbles' vpmaddubsw sums add up in 16 bits over up to 4 steps
// (|w x| <= 15 * 128, so a lane holds at most 4 x 2 x 2 x 1920 = 30720 <
// 32767) before one vpmaddwd widens them: per item and step 2 multiplies and
// 2 adds, against 3 and 2 widening every step.
template <int NB, int HS>
MW_TARGET_AVX2 void group_i4_avx2(const std::uint8_t* w, const std::uint32_t* x, std::int64_t b, std::int64_t steps,
                                  __m256i (&iacc)[NB][HS]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
    for (std::int64_t t0 = 0; t0 < steps; t0 += 4) {
        __m256i s16[NB][HS];
        for (int bb = 0; bb < NB; ++bb)
            for (int hs = 0; hs < HS; ++hs) s16[bb][hs] = _mm256_setzero_si256();
        for (std::int64_t t = t0; t < std::min(steps, t0 + 4); ++t) {
            const std::uint32_t* xt = x + 2 * t * b;  // quads k..k+3 of every item, then k+4..k+7
            for (int hs = 0; hs < HS; ++hs) {
                const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 64 * t + 32 * hs));
                const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                for (int bb = 0; bb < NB; ++bb)
                    s16[bb][hs] = _mm256_add_epi16(
                        s16[bb][hs], _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_set1_epi32(int(xt[bb]))),
                                                      _mm256_maddubs_epi16(hi, _mm256_set1_epi32(int(xt[b + bb])))));
            }
        }
        for (int bb = 0; bb < NB; ++bb)
            for (int hs = 0; hs < HS; ++hs) iacc[bb][hs] = _mm256_add_epi32(iacc[bb][hs], _mm256_madd_epi16(s16[bb][hs], ones));
    }
}

// int8 (stored as q + 128), HS halves, one block of x: back to signed q,
// then |q| against sign(x, q), which keeps vpmaddubsw out of 16-bit saturation.
template <int NB, int HS>
MW_TARGET_AVX2 void group_i8_avx2(const std::uint8_t* w, const std::uint32_t* x, std::int64_t b, std::int64_t steps,
                                  __m256i (&iacc)[NB][HS]) {
    const __m256i ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8(char(0x80));
    for (std::int64_t t = 0; t < steps; ++t)
        for (int hs = 0; hs < HS; ++hs) {
            const __m256i q = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 64 * t + 32 * hs)), flip);
            const __m256i aq = _mm256_abs_epi8(q);
            for (int bb = 0; bb < NB; ++bb) {
                const __m256i s = _mm256_maddubs_epi16(aq, _mm256_sign_epi8(_mm256_set1_epi32(int(x[t * b + bb])), q));
                iacc[bb][hs] = _mm256_add_epi32(iacc[bb][hs], _mm256_madd_epi16(s, ones));
            }
        }
}

// Both halves in one sweep while their accumulators fit (b <= 2 per call),
// else one half per sweep.
template <int NB>
MW_TARGET_AVX2 void panel_int_avx2(const Args& a, std::int64_t p, std::int64_t b0) {
    constexpr int HS = NB <= 2 ? 2 : 1;
    const PackedMatrix& P = *a.P;
    const bool int4 = P.spec.format == Format::int4, asym = P.spec.asym;
    // blk: the zero-point group (int4: G; int8: x's block, whose last may be
    // partial); per_block of them share d.
    const std::int64_t blk = int4 ? P.spec.group : P.acts.block, groups = (P.kp + blk - 1) / blk, per_block = P.acts.block / blk;
    const std::int64_t b = a.b, L = int4 ? 8 : 4;
    const std::uint8_t* w = P.w.as<std::uint8_t>() + p * (P.kp / L) * 64;
    alignas(32) float facc[NB][2][8] = {};
    for (std::int64_t g = 0, steps = 0; g < groups; ++g, w += steps * 64) {
        steps = (std::min((g + 1) * blk, P.kp) - g * blk) / L;
        const std::uint32_t* x = a.X->x + (g * blk / 4) * b + b0;
        for (int h0 = 0; h0 < 2; h0 += HS) {
            __m256i iacc[NB][HS];
            for (int bb = 0; bb < NB; ++bb)
                for (int hs = 0; hs < HS; ++hs) iacc[bb][hs] = _mm256_setzero_si256();
            if (int4) group_i4_avx2<NB, HS>(w + 32 * h0, x, b, steps, iacc);
            else group_i8_avx2<NB, HS>(w + 32 * h0, x, b, steps, iacc);
            for (int hs = 0; hs < HS; ++hs) {
                const int h = h0 + hs;
                __m256 s = _mm256_set1_ps(1.0f), z = _mm256_set1_ps(int4 ? 8.0f : 0.0f);
                if (int4) {
                    const std::int64_t at = (p * groups + g) * kRows + 8 * h;
                    s = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(P.scales.as<std::uint16_t>() + at)));
                    if (asym) z = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(P.zeros.as<std::uint16_t>() + at)));
                }
                for (int bb = 0; bb < NB; ++bb) {
                    const std::int64_t at = g * b + b0 + bb, at_d = (g / per_block) * b + b0 + bb;
                    const __m256 f = _mm256_fnmadd_ps(z, _mm256_set1_ps(a.X->qs[at]), _mm256_cvtepi32_ps(iacc[bb][hs]));
                    _mm256_store_ps(facc[bb][h], _mm256_fmadd_ps(f, _mm256_mul_ps(s, _mm256_set1_ps(a.X->d[at_d])),
                                                                _mm256_load_ps(facc[bb][h])));
                }
            }
        }
    }
    if (!int4)
        for (int h = 0; h < 2; ++h) {
            const __m256 rs = _mm256_loadu_ps(P.scales.as<float>() + p * kRows + 8 * h);
            for (int bb = 0; bb < NB; ++bb) _mm256_store_ps(facc[bb][h], _mm256_mul_ps(_mm256_load_ps(facc[bb][h]), rs));
        }
    store_halves<NB>(a, p, b0, facc);
}

// One sweep of a float panel over steps [t0, t1) for NI of the call's items
// (from i0) and HS of the two 8-row halves (from h0), NA accumulators per
// item and half, added into facc at the end. bf16 lanes hold k even (low
// half) and k odd (high half): a shift and an AND widen them, and x comes
// already widened ([k][b], X.xw); both FMAs of a step go into the same
// accumulator. With both halves in one sweep (HS = 2) an item's two
// broadcasts of x serve both.
template <bool BF, int NB, int NI, int HS, int NA>
MW_TARGET_AVX2 [[gnu::always_inline]] inline void sweep_float_avx2(const std::uint8_t* w, const float* xf,
                                                                  std::int64_t b, std::int64_t t0, std::int64_t t1,
                                                                  int i0, int h0, float (&facc)[NB][2][8]) {
    static_assert(16 % NA == 0, "a stretch's steps (a multiple of 16) are a whole number of NA-step rounds");
    const __m256i top = _mm256_set1_epi32(int(0xFFFF0000u));
    __m256 acc[NI][HS][NA], lo[HS], hi[HS];
    for (int i = 0; i < NI; ++i)
        for (int hs = 0; hs < HS; ++hs)
            for (int u = 0; u < NA; ++u) acc[i][hs][u] = _mm256_setzero_ps();
    for (std::int64_t t = t0; t < t1; t += NA) {
#pragma GCC unroll 4  // acc[..][u] must stay in registers: u a constant
        for (int u = 0; u < NA; ++u) {
            for (int hs = 0; hs < HS; ++hs) {
                const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 64 * (t + u) + 32 * (h0 + hs)));
                if constexpr (BF) {
                    lo[hs] = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
                    hi[hs] = _mm256_castsi256_ps(_mm256_and_si256(v, top));
                } else {
                    lo[hs] = _mm256_castsi256_ps(v);
                }
            }
            if constexpr (BF) {
                const float* xt = xf + 2 * (t + u) * b + i0;
                for (int i = 0; i < NI; ++i) {
                    const __m256 xl = _mm256_set1_ps(xt[i]), xh = _mm256_set1_ps(xt[b + i]);
                    for (int hs = 0; hs < HS; ++hs) {
                        acc[i][hs][u] = _mm256_fmadd_ps(lo[hs], xl, acc[i][hs][u]);
                        acc[i][hs][u] = _mm256_fmadd_ps(hi[hs], xh, acc[i][hs][u]);
                    }
                }
            } else {
                const float* xt = xf + (t + u) * b + i0;
                for (int i = 0; i < NI; ++i) {
                    const __m256 xi = _mm256_set1_ps(xt[i]);
                    for (int hs = 0; hs < HS; ++hs) acc[i][hs][u] = _mm256_fmadd_ps(lo[hs], xi, acc[i][hs][u]);
                }
            }
        }
    }
    for (int i = 0; i < NI; ++i)
        for (int hs = 0; hs < HS; ++hs) {
            __m256 s = acc[i][hs][0];
            for (int u = 1; u < NA; ++u) s = _mm256_add_ps(s, acc[i][hs][u]);
            float* f = facc[i0 + i][h0 + hs];
            _mm256_store_ps(f, _mm256_add_ps(_mm256_load_ps(f), s));
        }
}

// fp32 and bf16, a stretch of kAvx2Stretch steps at a time. Up to b = 4 each
// half is swept on its own with NA accumulators per item (4 at b <= 2, 2 at
// b = 4: 4-8 in all), so that few items still keep several FMA chains going
// (two pipes, a latency of 4-5 cycles). At b = 8, fp32 sweeps each half for
// all 8 items (8 accumulators); bf16 sweeps both halves for 4 items at a
// time (8 accumulators), so that each broadcast of x feeds two halves'
// FMAs: 16 broadcasts per step where half-by-half sweeps need 32, at the
// price of unpacking each step's weights twice.
template <int NB>
MW_TARGET_AVX2 void panel_float_avx2(const Args& a, std::int64_t p, std::int64_t b0) {
    constexpr int NA = NB <= 2 ? 4 : NB == 4 ? 2 : 1;
    const PackedMatrix& P = *a.P;
    const bool bf = P.spec.format == Format::bf16;
    const std::int64_t b = a.b, L = bf ? 2 : 1, units = P.kp / L;  // a multiple of 16
    const std::uint8_t* w = P.w.as<std::uint8_t>() + p * units * 64;
    const float* xf = bf ? a.X->xw.data() + b0 : reinterpret_cast<const float*>(a.X->x) + b0;  // [k][b]
    alignas(32) float facc[NB][2][8] = {};
    for (std::int64_t t0 = 0; t0 < units; t0 += kAvx2Stretch) {
        const std::int64_t t1 = std::min(units, t0 + kAvx2Stretch);
        if (!bf)
            for (int h = 0; h < 2; ++h) sweep_float_avx2<false, NB, NB, 1, NA>(w, xf, b, t0, t1, 0, h, facc);
        else if constexpr (NB == 8)
            for (int i0 = 0; i0 < NB; i0 += 4) sweep_float_avx2<true, NB, 4, 2, 1>(w, xf, b, t0, t1, i0, 0, facc);
        else
            for (int h = 0; h < 2; ++h) sweep_float_avx2<true, NB, NB, 1, NA>(w, xf, b, t0, t1, 0, h, facc);
    }
    store_halves<NB>(a, p, b0, facc);
}

enum class Path { i4s_vnni, i4a_vnni, i8_vnni, bf16_dot, bf16_fma, f32_avx512, int_avx2, float_avx2 };

template <int NB>
void panel(Path path, const Args& a, std::int64_t p, std::int64_t b0) {
    switch (path) {
        case Path::i4s_vnni: return panel_i4_vnni<false, NB>(a, p, b0);
        case Path::i4a_vnni: return panel_i4_vnni<true, NB>(a, p, b0);
        case Path::i8_vnni: return panel_i8_vnni<NB>(a, p, b0);
        case Path::bf16_dot: return panel_bf16_dot<NB>(a, p, b0);
        case Path::bf16_fma: return panel_bf16_fma<NB>(a, p, b0);
        case Path::f32_avx512: return panel_f32_avx512<NB>(a, p, b0);
        case Path::int_avx2: return panel_int_avx2<NB>(a, p, b0);
        case Path::float_avx2: return panel_float_avx2<NB>(a, p, b0);
    }
}

// bf16 on AVX-512: vdpbf16ps where it does at least the FMAs' FLOP per
// second, else widening + FMAs (the Xeon above: half their FLOP rate),
// measured once per process (harness/ceilings.hpp);
// MEMWALL_BF16=dot or fma chooses, for A/B runs and the tests of both.
bool use_vdpbf16ps() {
    if (!isa::has_avx512_bf16()) return false;
    const char* e = std::getenv("MEMWALL_BF16");
    const std::string want = e ? e : "";
    if (want == "dot") return true;
    if (want == "fma") return false;
    if (!want.empty()) throw std::invalid_argument("MEMWALL_BF16=" + want + ": unknown bf16 path (choices: dot, fma; unset: the faster here)");
    return bf16_dot_over_fma() >= 1.0;
}

Path path_for(const PackedMatrix& P) {
    const bool wide = select_isa() == Isa::avx512;
    switch (kind_of(P.spec)) {
        case Kind::f32: return wide ? Path::f32_avx512 : Path::float_avx2;
        case Kind::bf16: return !wide ? Path::float_avx2 : use_vdpbf16ps() ? Path::bf16_dot : Path::bf16_fma;
        case Kind::i8: return wide && isa::has_avx512_vnni() ? Path::i8_vnni : Path::int_avx2;
        case Kind::i4:
            return !(wide && isa::has_avx512_vnni()) ? Path::int_avx2 : P.spec.asym ? Path::i4a_vnni : Path::i4s_vnni;
    }
    return Path::float_avx2;
}

// Rounds x (rung 5's functions) and lays it out [k step][batch item].
void prepare_acts(const PackedMatrix& P, Path path, const float* x, std::int64_t b, PackedActs& X) {
    const Kind kind = kind_of(P.spec);
    const std::int64_t L = kind == Kind::f32 ? 1 : kind == Kind::bf16 ? 2 : 4, units = P.kp / L;
    const std::uint32_t* nat = nullptr;  // [b][nat_ld], the first `units` of each row used
    std::int64_t nat_ld = units;
    if (kind == Kind::f32) {
        if (P.kp == P.n_in) {
            nat = reinterpret_cast<const std::uint32_t*>(x);
        } else {
            X.xpad.assign(std::size_t(b * P.kp), 0.0f);
            for (std::int64_t bb = 0; bb < b; ++bb) std::memcpy(X.xpad.data() + bb * P.kp, x + bb * P.n_in, std::size_t(P.n_in) * 4);
            nat = reinterpret_cast<const std::uint32_t*>(X.xpad.data());
        }
    } else if (kind == Kind::bf16) {
        round_acts_bf16(x, b, P.n_in, P.kp, X.nat);  // nat_ld = units
        nat = reinterpret_cast<const std::uint32_t*>(X.nat.h.data());
        if (path == Path::bf16_fma || path == Path::float_avx2) {  // the same bf16 values, widened: [k][b]
            X.xw.resize(std::size_t(P.kp * b));
            for (std::int64_t bb = 0; bb < b; ++bb)
                for (std::int64_t k = 0; k < P.kp; ++k) {
                    const std::uint32_t bits = std::uint32_t(X.nat.h[std::size_t(bb * P.kp + k)]) << 16;
                    std::memcpy(&X.xw[std::size_t(k * b + bb)], &bits, 4);
                }
            X.x = nullptr;  // these paths read xw only
            return;
        }
    } else {
        // x's rows padded to whole blocks (a partial last block: zeros past n_in change no scale)
        const std::int64_t ld = (P.kp + P.acts.block - 1) / P.acts.block * P.acts.block;
        quantize_acts_int8(x, b, P.n_in, ld, P.acts.block, X.nat);
        nat = reinterpret_cast<const std::uint32_t*>(X.nat.q.data());
        nat_ld = ld / L;
        const std::int64_t blocks = X.nat.blocks;
        X.d.resize(std::size_t(blocks * b));
        for (std::int64_t bb = 0; bb < b; ++bb)
            for (std::int64_t g = 0; g < blocks; ++g) X.d[std::size_t(g * b + bb)] = X.nat.d[std::size_t(bb * blocks + g)];
        // zero-point groups: int8 x's blocks (their sums come with q), int4 the weight groups
        const std::int64_t zg = kind == Kind::i4 ? P.spec.group : P.acts.block, groups = (P.kp + zg - 1) / zg;
        X.qs.resize(std::size_t(groups * b));
        for (std::int64_t bb = 0; bb < b; ++bb)
            for (std::int64_t g = 0; g < groups; ++g) {
                std::int32_t sum = 0;
                if (kind == Kind::i4) {
                    const std::int8_t* q = X.nat.q.data() + bb * ld + g * zg;
                    for (std::int64_t k = 0; k < zg; ++k) sum += q[k];
                } else {
                    sum = X.nat.qsum[std::size_t(bb * blocks + g)];
                }
                X.qs[std::size_t(g * b + bb)] = float(sum);
            }
        if (kind == Kind::i4 && !P.spec.asym) {
            X.q8.resize(X.qs.size());
            for (std::size_t i = 0; i < X.qs.size(); ++i) X.q8[i] = -8 * std::int32_t(X.qs[i]);
        }
    }
    if (b == 1) {
        X.x = nat;
        return;
    }
    X.x32.resize(std::size_t(units * b));
    for (std::int64_t bb = 0; bb < b; ++bb)
        for (std::int64_t t = 0; t < units; ++t) X.x32[std::size_t(t * b + bb)] = nat[bb * nat_ld + t];
    X.x = X.x32.data();
}

void gemv_packed(const PackedMatrix& P, const float* x, std::int64_t b, float* y, PackedActs& X) {
    const Path path = path_for(P);
    prepare_acts(P, path, x, b, X);
    const Args a{&P, &X, b, y};
    // Panels dealt out in chunks of ~1 MiB: long sequential streams, in which
    // the prefetch 8 KiB ahead runs on into the chunk's next panel; each new
    // chunk starts a stream cold. Against chunks of ~256 KiB (A/B, --cold,
    // batch 1, the Xeon of results/xeon-260m-kvm-2c): int4 G = 32 at
    // 18432^2 6.12-6.15 against 6.43-6.53 ms, int8 and 8192^2 1-5% faster,
    // bf16 within 2% either way; 35 chunks still balance 2 threads at 8192^2 int4.
    const double panel_bytes = double(P.w.size_bytes()) / double(P.panels);
    const std::int64_t chunk = std::max<std::int64_t>(1, std::int64_t((1 << 20) / panel_bytes));
#pragma omp parallel for schedule(dynamic, 1)
    for (std::int64_t p0 = 0; p0 < P.panels; p0 += chunk)
        for (std::int64_t p = p0; p < std::min(P.panels, p0 + chunk); ++p)
            for (std::int64_t b0 = 0; b0 < b;) {
                const std::int64_t left = b - b0;
                if (left >= 8) panel<8>(path, a, p, b0), b0 += 8;
                else if (left >= 4) panel<4>(path, a, p, b0), b0 += 4;
                else if (left >= 2) panel<2>(path, a, p, b0), b0 += 2;
                else panel<1>(path, a, p, b0), b0 += 1;
            }
}

}  // namespace

std::string repacked_compute(const QuantSpec& s) {
    switch (path_for(PackedMatrix{.spec = s})) {
        case Path::bf16_dot: return "bf16";
        case Path::bf16_fma:
        case Path::float_avx2: return s.format == Format::f32 ? "" : "f32";
        case Path::f32_avx512: return "";
        default: return "int8";
    }
}

std::string repacked_path(const QuantSpec& s) {
    switch (path_for(PackedMatrix{.spec = s})) {
        case Path::i4s_vnni:
        case Path::i4a_vnni:
        case Path::i8_vnni: return "avx512_vnni (vpdpbusd, 16-row panels)";
        case Path::bf16_dot: return "avx512_bf16 (vdpbf16ps, 16-row panels)";
        case Path::bf16_fma: return "avx512 (bf16 widened + FMA, 16-row panels)";
        case Path::f32_avx512: return "avx512 (FMA, 16-row panels)";
        case Path::int_avx2: return "avx2 (vpmaddubsw + vpmaddwd, 8-row halves)";
        case Path::float_avx2: return "avx2 (widen + FMA, 8-row halves)";
    }
    return "";
}

}  // namespace cpu

// This rung as a function (kernels/precision/gemv.hpp).
void gemv(const PackedMatrix& m, const float* x, std::int64_t b, float* y) {
    thread_local cpu::PackedActs X;
    cpu::gemv_packed(m, x, b, y, X);
}

}  // namespace mw::precision

namespace mwp = mw::precision;

namespace {

// Quantized and repacked here (untimed); x is rounded and laid out inside
// every timed call.
std::function<mw::Instance(mw::Problem&)> prepare_repacked(mwp::QuantSpec spec) {
    return [spec](mw::Problem& p) {
        const std::int64_t n_out = p.shape["n_out"], n_in = p.shape["n_in"], b = p.shape["b"];
        auto m = std::make_shared<mwp::PackedMatrix>(
            mwp::repack(mwp::quantize(spec, p.in("W").as<float>(), n_out, n_in)));
        auto X = std::make_shared<mwp::cpu::PackedActs>();
        const float* x = p.in("x").as<float>();
        float* y = p.out("y").as<float>();
        mwp::cpu::gemv_packed(*m, x, b, y, *X);  // sizes the scratch: the timed calls do not allocate
        mw::Instance inst;
        inst.run = [=] { mwp::cpu::gemv_packed(*m, x, b, y, *X); };
        inst.path = mwp::cpu::repacked_path(spec);
        inst.compute = mwp::cpu::repacked_compute(spec);
        return inst;
    };
}

mw::Variant repacked_variant(std::string name, mwp::QuantSpec spec, std::string rationale) {
    const mwp::ActSpec acts = mwp::cpu::repacked_acts(spec);
    return {.name = std::move(name), .op = "gemv_q", .lever = "precision",
            .role = mw::Role::optimized, .backend = mw::Backend::cpu, .rung = 6,
            .rationale = std::move(rationale),
            .needs = {"avx2"},
            .bytes = [spec](const mw::Shape& s, mw::DType) { return mwp::gemv_bytes(spec, s); },
            .compute = spec.format == mwp::Format::f32 ? "" : spec.format == mwp::Format::bf16 ? "bf16" : "int8",
            .prepare = prepare_repacked(spec),
            .contract_oracle = spec.format == mwp::Format::f32 ? nullptr : mwp::contract_oracle(spec, acts)};
}

std::string int4_rationale(int g, bool asym) {
    return "int4 g" + std::to_string(g) + (asym ? " asym" : " sym") +
           " in 16-row panels: one 64-byte load and two unpack ops feed 128 weights to every batch item's vpdpbusd;"
           " x int8 per block of 256, its scale applied once per block";
}

}  // namespace

MW_REGISTER_VARIANT(gemv_q_fp32_repacked_cpu, {repacked_variant("fp32_repacked", {mwp::Format::f32},
    "fp32 in 16-row panels: x broadcast from L1, each loaded weight register reused by up to 8 batch items")});
MW_REGISTER_VARIANT(gemv_q_bf16_dot_repacked_cpu, {repacked_variant("bf16_dot_repacked", {mwp::Format::bf16},
    "bf16 in 16-row panels, vdpbf16ps against broadcast bf16 pairs of x, reused by up to 8 batch items")});
MW_REGISTER_VARIANT(gemv_q_int8_dot_repacked_cpu, {repacked_variant("int8_dot_repacked", {mwp::Format::int8_channel},
    "int8 in 16-row panels, vpdpbusd against broadcast int8 quads of x, reused by up to 8 batch items;"
    " x int8 per block of 256, its scale applied once per block")});
MW_REGISTER_VARIANT(gemv_q_int4_g32_sym_dot_repacked_cpu, {repacked_variant("int4_g32_sym_dot_repacked", {mwp::Format::int4, 32, false}, int4_rationale(32, false))});
MW_REGISTER_VARIANT(gemv_q_int4_g64_sym_dot_repacked_cpu, {repacked_variant("int4_g64_sym_dot_repacked", {mwp::Format::int4, 64, false}, int4_rationale(64, false))});
MW_REGISTER_VARIANT(gemv_q_int4_g32_asym_dot_repacked_cpu, {repacked_variant("int4_g32_asym_dot_repacked", {mwp::Format::int4, 32, true}, int4_rationale(32, true))});
MW_REGISTER_VARIANT(gemv_q_int4_g64_asym_dot_repacked_cpu, {repacked_variant("int4_g64_asym_dot_repacked", {mwp::Format::int4, 64, true}, int4_rationale(64, true))});
