// Hopper wgmma building blocks shared by the sm_90a kernels (cuda_wgmma_gemm.cu, cuda_wgmma_tile.cu):
// the 128-byte swizzle of a K-major operand in shared memory, its matrix descriptor, and
// wgmma.mma_async m64nNk16 (bf16 in, fp32 accumulation) for N = 16, 32, 64, 128. Included only by
// .cu files built for sm_90a; the wgmma wrappers exist only where __CUDA_ARCH_FEAT_SM90_ALL is set.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace df11::cuda::wgmma {

// Byte offset of 16-byte chunk c (0..7) of row r in a 128-byte-swizzled K-major block (each row
// one 128-byte line of 64 bf16 columns; the block 1024-byte aligned).
__device__ __forceinline__ uint32_t Swizzled(int r, int c) {
  return static_cast<uint32_t>(r * 128 + ((c ^ (r & 7)) << 4));
}

// wgmma's shared-memory matrix descriptor of a K-major operand in the 128-byte swizzle starting at
// shared address `address`: swizzle mode 1 (bits 62-63), stride between 8-row groups 1024 bytes
// (bits 32-45, in 16-byte units), leading offset unused (1), start address in 16-byte units. The
// k-th 16-column step of a 64-column block starts 32 k bytes on.
__device__ __forceinline__ uint64_t Descriptor(uint32_t address) {
  return uint64_t{1} << 62 | uint64_t{1024 >> 4} << 32 | uint64_t{1} << 16 | ((address & 0x3FFFF) >> 4);
}

// Descriptor in two words, for a loop of wgmma over one stage: DescriptorLow(address) once, then
// DescriptorAt(low, offset) == Descriptor(address + offset) for a 16-byte multiple `offset` while
// address + offset stays below 256 KB (every shared address does), one 32-bit add a wgmma. Built
// whole at each of a stage's 16 steps, the wgmma tile linear's descriptors took ~13 instructions a
// wgmma, ~30% of its DF11 kernel's at 64 tokens (ncu, bench/results/ncu_wgmma_tile_h200.log).
__device__ __forceinline__ uint32_t DescriptorLow(uint32_t address) {
  return uint32_t{1} << 16 | ((address & 0x3FFFF) >> 4);
}
__device__ __forceinline__ uint64_t DescriptorAt(uint32_t low, uint32_t offset) {
  return uint64_t{1} << 62 | uint64_t{1024 >> 4} << 32 | (low + (offset >> 4));
}

// The descriptor of an MN-major operand (N contiguous: wgmma's B read with imm-trans-b = 1) in the
// 128-byte swizzle: each 128-byte line holds 64 consecutive N elements of one k, 8 lines (k .. k + 7)
// one 1024-byte swizzle atom; stride between 8-k groups (SBO) 1024 bytes, between 64-element N
// blocks (LBO) `n_block_bytes` (CUTLASS's canonical Major-MN SW128 layout).
__device__ __forceinline__ uint64_t DescriptorMN(uint32_t address, uint32_t n_block_bytes) {
  return uint64_t{1} << 62 | uint64_t{1024 >> 4} << 32 | uint64_t{(n_block_bytes >> 4) & 0x3FFF} << 16 |
         ((address & 0x3FFFF) >> 4);
}

// Whether this process's current GPU runs sm_90a code (compute capability 9.0), asked once.
inline bool DeviceIsSm90() {
  static const bool sm90 = [] {
    int device = 0, major = 0, minor = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return major == 9 && minor == 0;
  }();
  return sm90;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// d (+)= A · B over 16 columns: wgmma m64n16k16, both operands K-major in shared memory (descriptors a
// and b), fp32 accumulators; accumulate = false starts from zero.
__device__ __forceinline__ void Wgmma16(float (&d)[8], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, "
      "0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));
}

// d (+)= A · B over 16 columns: wgmma m64n32k16, both operands K-major in shared memory (descriptors a
// and b), fp32 accumulators; accumulate = false starts from zero.
__device__ __forceinline__ void Wgmma32(float (&d)[16], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));
}

// d (+)= A · B over 16 columns: wgmma m64n64k16, both operands K-major in shared memory (descriptors a
// and b), fp32 accumulators; accumulate = false starts from zero.
__device__ __forceinline__ void Wgmma64(float (&d)[32], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, "
      "1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));
}

// The 64 accumulators of an m64n128 wgmma: their operand list in the instruction (%0 .. %63) and
// as the asm statement's in-out operands.
#define DF11_WGMMA_D64                                                                                              \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "  \
  "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"
#define DF11_WGMMA_D64_OUT(d)                                                                                 \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),  \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), \
      "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), \
      "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), \
      "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// d (+)= A · B over 16 columns: wgmma m64n128k16, both operands K-major in shared memory (descriptors a
// and b), fp32 accumulators; accumulate = false starts from zero.
__device__ __forceinline__ void Wgmma128(float (&d)[64], uint64_t a, uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " DF11_WGMMA_D64 ", %64, %65, p, 1, 1, 0, 0;\n}\n"
      : DF11_WGMMA_D64_OUT(d)
      : "l"(a), "l"(b), "r"(static_cast<int>(accumulate)));
}

template <int kN>
__device__ __forceinline__ void Wgmma(float (&d)[kN / 2], uint64_t a, uint64_t b, bool accumulate) {
  static_assert(kN == 16 || kN == 32 || kN == 64 || kN == 128, "m64nNk16 for N = 16, 32, 64, 128");
  if constexpr (kN == 16) {
    Wgmma16(d, a, b, accumulate);
  } else if constexpr (kN == 32) {
    Wgmma32(d, a, b, accumulate);
  } else if constexpr (kN == 64) {
    Wgmma64(d, a, b, accumulate);
  } else {
    Wgmma128(d, a, b, accumulate);
  }
}

// d += A · B over 16 k: wgmma m64n128k16 with A in registers (the mma.sync m16n8k16 A fragment of
// the warp's 16 rows: a0 rows g, k 2t..2t+1; a1 rows g + 8; a2, a3 the same at k + 8) and B
// MN-major in shared memory (descriptor b, DescriptorMN), fp32 accumulators.
__device__ __forceinline__ void Wgmma128RegA(float (&d)[64], const uint32_t (&a)[4], uint64_t b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " DF11_WGMMA_D64
      ", {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : DF11_WGMMA_D64_OUT(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
}

// Orders this thread's register and shared-memory accesses before the warpgroup's next wgmma.
__device__ __forceinline__ void Fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
// Closes the wgmma issued since the last commit into one group.
__device__ __forceinline__ void Commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most kPending of the warpgroup's groups still run.
template <int kPending>
__device__ __forceinline__ void Wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// Keeps the compiler from moving or touching accumulators between a wgmma and its wait (as
// CUTLASS's warpgroup_fence_operand): otherwise ptxas serializes the wgmma (C7515).
template <int kRegs>
__device__ __forceinline__ void FenceOperands(float (&d)[kRegs]) {
#pragma unroll
  for (int i = 0; i < kRegs; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// Makes this thread's generic-proxy writes to shared memory (st.shared, cp.async) visible to wgmma.
__device__ __forceinline__ void FenceProxyAsync() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
#endif

}  // namespace df11::cuda::wgmma
