//===- Matmul.h - dcrt_matmul's descriptor: checks, messages, host loop ---===//
//
// What every backend shares about a dcrt_matmul_desc (dcrt.h): the checks
// core/Runtime.cpp runs before forwarding, the one-line description error
// messages print, and the stored shapes of A, B and C. The host backend's
// loop (host/HostMatmul.cpp) is declared here too so that unit tests can
// call it without a job.
//
//===----------------------------------------------------------------------===//
#ifndef DCRT_CORE_MATMUL_H
#define DCRT_CORE_MATMUL_H

#include "dcrt/dcrt.h"

#include <cstdint>
#include <string>

namespace dcrt::detail {

/// The stored (row-major) shape of each operand of `desc`: A is m x k, or
/// k x m with trans_a; B is k x n, or n x k with trans_b; C is m x n.
struct StoredMatrix {
  int64_t rows, cols;
};
StoredMatrix storedA(const dcrt_matmul_desc &desc);
StoredMatrix storedB(const dcrt_matmul_desc &desc);
StoredMatrix storedC(const dcrt_matmul_desc &desc);

/// "batch 2, m 64 n 32 k 16, A bf16 (trans) lda 64 stride 0, B ..., C f32
/// ldc 32 stride 2048, accumulate 1": every field, for error messages.
std::string describeMatmul(const dcrt_matmul_desc &desc);

/// Fatal (through dcrt::fatal, naming `caller` and the descriptor) unless
/// `desc` is one dcrt_matmul accepts: positive batch, m, n, k; lda, ldb,
/// ldc at least the stored row length; batch strides >= 0, C's at least one
/// matrix when batch > 1 (outputs of a batch never overlap); A and B of one
/// dtype among f32, bf16, f16 and C of that dtype or f32 (what cuBLASLt
/// computes with fp32 accumulation); trans_a, trans_b, accumulate 0 or 1;
/// non-null buffers.
void checkMatmul(const dcrt_matmul_desc *desc, const void *a, const void *b,
                 const void *c, const char *caller);

/// The host backend's dcrt_matmul: plain loops (i-k-j over fp32 copies of
/// the operands), fp32 accumulation, C rounded once to its dtype. `desc`
/// must have passed checkMatmul.
void hostMatmul(const dcrt_matmul_desc &desc, const void *a, const void *b,
                void *c);

} // namespace dcrt::detail

#endif // DCRT_CORE_MATMUL_H
