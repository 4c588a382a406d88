// Internal to the fixed-lane kernels (df11_lanes_fixed.cu: GEMV, decode, compare; tile_gemm.cu: the
// tensor-core linear's DF11 loader): a warp's decoding of one block of 4 entries per lane (layout:
// df11_lanes_fixed.h). Per entry (8 elements of one lane) the 3-bit codes are byte-permute
// selectors into two 8-byte tables held in registers, one giving each exponent's high 7 bits (the
// BF16 word's high byte without the sign), one its low bit (bit 7 of the low byte). Escapes (code
// 7): per block a warp-wide prefix sum tells each lane where its escape nibbles start; each lane
// then takes its own from a 64-bit queue, the first of an entry through slot 7 of the tables (no
// loop), with no further warp-wide step; an escape's bytes come from a 16-entry table in shared
// memory (FillEscapeTable). Included only by .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/df11_lanes_cuda.h"

namespace df11::fixed_lanes {

// Byte tables of the codes, split as a BF16 word needs them: the exponent's high 7 bits (the high
// byte without the sign) and its low bit (bit 7 of the low byte). The escape nibbles' table is in
// shared memory, where one 8-byte load gives an escape's two bytes already in place for the codes'
// slot 7. It replaced byte permutes of 8 register words (a compare, 4 selects, 2 prmt, 2 masks, 2
// shifts and 2 selects an entry); measured on the H100, the DF11 linears of a step 3-9% faster at
// 1-64 tokens, the DF11 step at batch 1 / 8 / 64 0.6 / 0.7 / 0.5 ms faster
// (bench/results/df11_gemv_h100_escape_table_ab.log, ab_h100_escape_table.log).
struct Tables {
  uint32_t hi0, hi1, lo0, lo1;  // byte c: primary[c] >> 1, (primary[c] & 1) << 7
  const uint2* escape;          // the CTA's escape table: entry v for escape nibble v (EscapeTableEntry)
};

// Exponent byte e as the codes' slot 7 takes it: its high 7 bits in byte 3 of .x, its low bit in
// bit 31 of .y.
__device__ __forceinline__ uint2 SlotSevenBytes(uint32_t e) { return make_uint2((e >> 1) << 24, (e & 1u) << 31); }

// Entry v (0..15) of an escape table: SlotSevenBytes of secondary[v] (entry 15, a rare byte, holds
// secondary's padding: the caller takes the rare byte).
__device__ __forceinline__ uint2 EscapeTableEntry(const DeviceLanes& w, int v) {
  return SlotSevenBytes((w.secondary[v / 4] >> (8 * (v % 4))) & 0xffu);
}

// Fills a CTA's escape table (shared, 16 entries) from threads 0..15; the CTA must pass a
// barrier before any thread reads it.
__device__ __forceinline__ void FillEscapeTable(uint2* table, const DeviceLanes& w, int thread) {
  if (thread < 16) table[thread] = EscapeTableEntry(w, thread);
}

// table: the CTA's escape table (FillEscapeTable; shared memory).
__device__ __forceinline__ Tables MakeTables(const DeviceLanes& w, const uint2* table) {
  Tables t;
  t.hi0 = (w.primary[0] >> 1) & 0x7f7f7f7fu;
  t.hi1 = (w.primary[1] >> 1) & 0x7f7f7f7fu;
  t.lo0 = (w.primary[0] << 7) & 0x80808080u;
  t.lo1 = (w.primary[1] << 7) & 0x80808080u;
  t.escape = table;
  return t;
}

// FillEscapeTable from threads 0..15 of the CTA, then MakeTables, then the barrier the table
// needs: every thread of the CTA calls it, where no thread may have returned.
__device__ __forceinline__ Tables CtaTables(uint2* table, const DeviceLanes& w) {
  FillEscapeTable(table, w, static_cast<int>(threadIdx.x));
  const Tables t = MakeTables(w, table);
  __syncthreads();  // the escape table is in
  return t;
}

// One lane's escape nibbles: `queue` holds `left` of them, from nibble `next` of its tile's array
// on. Refill loads the next 9 to 16 (a lane rarely has more than 9 in a block).
struct EscapeQueue {
  const uint32_t* words;  // the tile's first escape word
  uint32_t limit;         // words in the array from `words` on (>= 1)
  uint32_t next, left;
  uint64_t queue;
  uint64_t rare;  // index of the lane's next rare byte
};

// The low nibble of a queue, opaque to the compiler, so that a table address is one shift-add
// of it and not a second mask of the queue shifted. With Prmt below, measured on the H100
// (bench/results/df11_gemv_h100_prmt_nibble_ab.log, ab_h100_prmt_nibble.log): the DF11 tile
// linears of a step 2-4% faster at 3-64 tokens, the DF11 step at batch 8 / 64 0.2 / 0.4 ms faster.
__device__ __forceinline__ uint32_t LowNibble(uint64_t queue) {
  uint32_t v;
  asm("and.b32 %0, %1, 15;" : "=r"(v) : "r"(static_cast<uint32_t>(queue)));
  return v;
}

// prmt.b32 in its default mode: byte k of the result is byte s_k of y:x (s_k: nibble k of s, whose
// bit 3, the sign replication, must be 0; __byte_perm would mask every selector again). Measured
// and not kept (same files): the codes' tables as the second operand (selectors XOR 0x44444444),
// so that the uniform tables need no register copies; no faster than this.
__device__ __forceinline__ uint32_t Prmt(uint32_t x, uint32_t y, uint32_t s) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(s));
  return r;
}

// Everything below is inlined: a queue passed to a function that is not would live in local memory.
__device__ __forceinline__ void Refill(EscapeQueue& q) {
  const uint32_t word = q.next / 8;
  const uint32_t lo = __ldg(q.words + min(word, q.limit - 1)), hi = __ldg(q.words + min(word + 1, q.limit - 1));
  q.queue = (static_cast<uint64_t>(hi) << 32 | lo) >> (4 * (q.next % 8));
  q.left = 16 - q.next % 8;
}

// kRefill = false: the caller knows the queue holds every nibble it will pop (see EntryWords).
template <bool kRefill = true>
__device__ __forceinline__ uint32_t PopNibble(EscapeQueue& q) {
  if (kRefill && q.left == 0) Refill(q);
  const uint32_t v = LowNibble(q.queue);
  q.queue >>= 4;
  --q.left;
  ++q.next;
  return v;
}

// Counts the nibbles 15 among the lane's next n escape nibbles (tiles with rare bytes only).
__device__ __forceinline__ uint32_t CountRare(EscapeQueue q, uint32_t n) {
  uint32_t r = 0;
  for (uint32_t i = 0; i < n; ++i) r += PopNibble(q) == 15u;
  return r;
}

// Inclusive sum of v over lanes 0..lane of the warp (every lane calls it).
__device__ __forceinline__ uint32_t WarpInclusiveSum(uint32_t v, int lane) {
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const uint32_t u = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += u;
  }
  return v;
}

// The lane's next rare byte (a call, so that the common path does not carry it predicated).
inline __device__ __noinline__ uint32_t RareByte(const uint8_t* rare, uint64_t index, uint64_t count) {
  return rare[min(index, count - 1)];
}

// Exponent bytes of escape nibble v as the codes' slot 7 takes them (SlotSevenBytes); a rare
// one's (v = 15) from the lane's next rare byte when `take`. kRare = false: the block has no rare bytes (its escapes
// hold no 15), so the check and the call are left out.
template <bool kRare = true>
__device__ __forceinline__ uint2 EscapeBytes(uint32_t v, bool take, EscapeQueue& q, const Tables& t,
                                             const DeviceLanes& w) {
  uint2 e = t.escape[v];
  if constexpr (kRare) {
    if (__builtin_expect(v == 15 && take, 0)) {
      e = SlotSevenBytes(RareByte(w.rare, q.rare++, w.num_rare));
    }
  }
  return e;
}

// One entry: the bytes hi/lo [elements 0..3, 4..7] of its 8 exponents from its selector v (code k
// in nibble k) and escape mask m (bit 4k: code k is 7). The lane's first escape of the entry goes
// in through the tables' slot 7, so every escaped element first gets its exponent without a loop
// or a branch; an entry with more escapes then rewrites those after the first, one by one.
// Divergent only there: no warp-wide operation. The queue holds the entry's first nibble.
template <bool kRefill = true, bool kRare = true>
__device__ __forceinline__ void DecodeEntry(uint32_t v, uint32_t m, uint32_t (&hi)[2], uint32_t (&lo)[2],
                                            EscapeQueue& q, const Tables& t, const DeviceLanes& w) {
  const bool any = m != 0;
  // Without an escape the entry's selectors never name slot 7, so its bytes may be anything.
  const uint2 e7 = EscapeBytes<kRare>(LowNibble(q.queue), any, q, t, w);
  const uint32_t used = any ? 1u : 0u;
  q.queue >>= 4 * used;
  q.left -= used;
  q.next += used;
  const uint32_t th1 = t.hi1 | e7.x, tl1 = t.lo1 | e7.y;  // slot 7: byte 3
  hi[0] = Prmt(t.hi0, th1, v);
  hi[1] = Prmt(t.hi0, th1, v >> 16);
  lo[0] = Prmt(t.lo0, tl1, v);
  lo[1] = Prmt(t.lo0, tl1, v >> 16);
  for (m &= m - 1; m != 0; m &= m - 1) {  // escapes after the first
    const uint2 e = EscapeBytes<kRare>(PopNibble<kRefill>(q), true, q, t, w);
    const uint32_t bit = __ffs(m) - 1;       // 4k
    const uint32_t shift = 2 * (bit & 12u);  // 8 (k % 4)
    const uint32_t keep = ~(0xffu << shift);
    const uint32_t h = e.x >> (24 - shift), l = e.y >> (24 - shift);
    if (bit < 16) {
      hi[0] = (hi[0] & keep) | h;
      lo[0] = (lo[0] & keep) | l;
    } else {
      hi[1] = (hi[1] & keep) | h;
      lo[1] = (lo[1] & keep) | l;
    }
  }
  if (kRefill && q.left == 0) Refill(q);  // the next entry's first nibble (rare: > 9 escapes in a block)
}

// One block of a lane as loaded: its 3 code words and its entries' sign_mantissa bytes.
struct BlockRaw {
  uint32_t a[3];
  uint2 s[4];
};

// One block's codes: selectors, escape masks and sign_mantissa bytes of its 4 entries, which are
// real (ok), and the lane's escape count.
struct BlockCodes {
  uint32_t sel[4], m[4], n;
  uint2 s[4];
  bool ok[4];
};

// Loads the lane's block at `words` (its word of the block) whose entry i's sign_mantissa bytes
// are at sm_entry(i); real(i) says whether entry i lies in the matrix (else no load).
template <typename Real, typename SmEntry>
__device__ __forceinline__ BlockRaw LoadRaw(const uint32_t* words, Real real, SmEntry sm_entry) {
  BlockRaw r;
  r.a[0] = __ldcs(words);
  r.a[1] = __ldcs(words + 32);
  r.a[2] = __ldcs(words + 64);
#pragma unroll
  for (int i = 0; i < 4; ++i) r.s[i] = real(i) ? __ldcs(reinterpret_cast<const uint2*>(sm_entry(i))) : make_uint2(0, 0);
  return r;
}

// The codes of a loaded block; an entry that is not real has code 0 and no escapes.
template <typename Real>
__device__ __forceinline__ BlockCodes Codes(const BlockRaw& r, Real real) {
  BlockCodes b;
  b.sel[0] = r.a[0] & 0x77777777u;
  b.sel[1] = r.a[1] & 0x77777777u;
  b.sel[2] = r.a[2] & 0x77777777u;
  b.sel[3] = ((r.a[0] >> 3) & 0x11111111u) | ((r.a[1] >> 2) & 0x22222222u) | ((r.a[2] >> 1) & 0x44444444u);
  b.n = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    b.ok[i] = real(i);
    b.s[i] = r.s[i];
    const uint32_t v = b.sel[i];
    b.m[i] = b.ok[i] ? v & (v >> 1) & (v >> 2) & 0x11111111u : 0u;
    b.n += __popc(b.m[i]);
  }
  return b;
}

template <typename Real, typename SmEntry>
__device__ __forceinline__ BlockCodes LoadBlock(const uint32_t* words, Real real, SmEntry sm_entry) {
  return Codes(LoadRaw(words, real, sm_entry), real);
}

// Points q at the lane's first escape of the block (every lane calls it): the block's escapes start
// at nibble block_nibble of the tile, the lane's after those of the lanes before it; its rare bytes
// likewise after rare_base. Advances block_nibble and rare_base past the block.
__device__ __forceinline__ void StartBlock(const BlockCodes& b, int lane, bool has_rare, uint32_t& block_nibble,
                                           uint64_t& rare_base, EscapeQueue& q) {
  const uint32_t through = WarpInclusiveSum(b.n, lane);
  q.next = block_nibble + through - b.n;
  Refill(q);  // the lane's first 9 to 16 nibbles, loaded by every lane (no divergence)
  block_nibble += __shfl_sync(0xffffffffu, through, 31);
  if (has_rare) {
    const uint32_t r = CountRare(q, b.n);
    const uint32_t r_through = WarpInclusiveSum(r, lane);
    q.rare = rare_base + (r_through - r);
    rare_base += __shfl_sync(0xffffffffu, r_through, 31);
  }
}

// Whether any lane of the warp has more escapes in the block than StartBlock queued (9 to 16), so
// its entries must refill mid-block (every lane calls it; the same answer for all).
__device__ __forceinline__ bool NeedsRefill(const BlockCodes& b, const EscapeQueue& q) {
  return __any_sync(0xffffffffu, b.n > q.left);
}

// Entry i of the block as 8 BF16 words (call for i = 0..3 in order after StartBlock, each once: the
// escapes are consumed in that order). An entry that is not ok gives words no caller may use.
// kRefill = false skips the queue's refill checks: only when the lane's escapes in the block (b.n)
// fit the nibbles StartBlock loaded (q.left), which a warp can check once per block (NeedsRefill).
// kRare = false skips the rare-byte check: only for a block whose warp has no rare bytes (a tile without
// any, or a block past which StartBlock moved no rare index).
template <bool kRefill = true, bool kRare = true>
__device__ __forceinline__ uint4 EntryWords(const BlockCodes& b, int i, EscapeQueue& q, const Tables& t,
                                            const DeviceLanes& w) {
  uint32_t hi[2], lo[2];
  DecodeEntry<kRefill, kRare>(b.sel[i], b.m[i], hi, lo, q, t, w);
  const uint32_t h0 = hi[0] | (b.s[i].x & 0x80808080u), l0 = lo[0] | (b.s[i].x & 0x7f7f7f7fu);
  const uint32_t h1 = hi[1] | (b.s[i].y & 0x80808080u), l1 = lo[1] | (b.s[i].y & 0x7f7f7f7fu);
  return make_uint4(__byte_perm(l0, h0, 0x5140), __byte_perm(l0, h0, 0x7362), __byte_perm(l1, h1, 0x5140),
                    __byte_perm(l1, h1, 0x7362));
}

// A tile's escape queue, before its first block: the tile's escape words and rare bytes.
__device__ __forceinline__ EscapeQueue TileQueue(const DeviceLanes& w, int64_t at) {
  EscapeQueue q;
  const uint32_t escape_word = min(w.tile_escapes[at], static_cast<uint32_t>(w.num_escape_words - 1));
  q.words = w.escapes + escape_word;
  q.limit = static_cast<uint32_t>(w.num_escape_words) - escape_word;
  q.next = 0;
  q.left = 0;
  q.queue = 0;
  q.rare = w.tile_rare[at];
  return q;
}

}  // namespace df11::fixed_lanes
