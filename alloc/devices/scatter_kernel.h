// The scatter kernel: copies many pieces to arbitrary device addresses in
// one launch. CudaDevice uses it for writes of many small pieces (a flush of
// scattered dirty pages): the GPU reads each piece straight from pinned host
// memory, which it can address (unified addressing), so a whole batch costs
// one launch, where the same pieces as separate copies each cost the
// driver's per-copy time even batched (docs/MEASUREMENTS.md), and nothing is
// gathered on the host first.
//
// Written as PTX, which the driver compiles for the GPU at hand when the
// module loads, so building cudafs needs no CUDA compiler. The target is
// old on purpose (any GPU with the virtual memory API can load it).
//
// cudafs_scatter(pieces, count): block b copies pieces b, b + gridDim.x,
// ...; its threads copy 16 bytes each per step when the piece's
// destination, source and length are all multiples of 16, else one byte
// each. `pieces` and every address in them must be addressable by the GPU;
// pieces must not overlap each other.
#ifndef CUDAFS_ALLOC_DEVICES_SCATTER_KERNEL_H_
#define CUDAFS_ALLOC_DEVICES_SCATTER_KERNEL_H_

#include <cstdint>

namespace cudafs {

// One piece, as the kernel reads it (24 bytes, no padding).
struct ScatterPiece {
  uint64_t destination;
  uint64_t source;
  uint64_t length;
};
static_assert(sizeof(ScatterPiece) == 24);

inline constexpr char kScatterKernelName[] = "cudafs_scatter";
inline constexpr unsigned kScatterThreadsPerBlock = 256;  // one 4 KiB page per step

inline constexpr char kScatterKernelPtx[] = R"PTX(
.version 7.0
.target sm_52
.address_size 64

.visible .entry cudafs_scatter(
    .param .u64 param_pieces,
    .param .u32 param_count)
{
    .reg .pred %p<4>;
    .reg .b32 %r<6>;
    .reg .b32 %v<4>;
    .reg .b16 %byte;
    .reg .b64 %rd<14>;

    ld.param.u64 %rd1, [param_pieces];
    ld.param.u32 %r1, [param_count];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r2, %ctaid.x;          // this block's piece
    mov.u32 %r3, %nctaid.x;         // piece stride
    mov.u32 %r4, %tid.x;
    mov.u32 %r5, %ntid.x;
    cvt.u64.u32 %rd10, %r4;
    cvt.u64.u32 %rd11, %r5;
$PIECE:
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 bra $DONE;
    mul.wide.u32 %rd3, %r2, 24;
    add.u64 %rd3, %rd1, %rd3;
    ld.global.u64 %rd4, [%rd3];     // destination
    ld.global.u64 %rd5, [%rd3+8];   // source
    ld.global.u64 %rd6, [%rd3+16];  // length
    cvta.to.global.u64 %rd4, %rd4;
    cvta.to.global.u64 %rd5, %rd5;
    or.b64 %rd7, %rd4, %rd5;
    or.b64 %rd7, %rd7, %rd6;
    and.b64 %rd7, %rd7, 15;
    setp.ne.u64 %p2, %rd7, 0;
    @%p2 bra $BYTES;
    shl.b64 %rd8, %rd10, 4;         // offset = tid * 16
    shl.b64 %rd9, %rd11, 4;         // step = ntid * 16
$WIDE:
    setp.ge.u64 %p3, %rd8, %rd6;
    @%p3 bra $NEXT;
    add.u64 %rd12, %rd5, %rd8;
    add.u64 %rd13, %rd4, %rd8;
    ld.global.v4.u32 {%v0, %v1, %v2, %v3}, [%rd12];
    st.global.v4.u32 [%rd13], {%v0, %v1, %v2, %v3};
    add.u64 %rd8, %rd8, %rd9;
    bra.uni $WIDE;
$BYTES:
    mov.u64 %rd8, %rd10;            // offset = tid, step = ntid
$BYTE:
    setp.ge.u64 %p3, %rd8, %rd6;
    @%p3 bra $NEXT;
    add.u64 %rd12, %rd5, %rd8;
    add.u64 %rd13, %rd4, %rd8;
    ld.global.u8 %byte, [%rd12];
    st.global.u8 [%rd13], %byte;
    add.u64 %rd8, %rd8, %rd11;
    bra.uni $BYTE;
$NEXT:
    add.u32 %r2, %r2, %r3;
    bra.uni $PIECE;
$DONE:
    ret;
}
)PTX";

}  // namespace cudafs

#endif  // CUDAFS_ALLOC_DEVICES_SCATTER_KERNEL_H_
