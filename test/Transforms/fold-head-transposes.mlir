// RUN: dc-opt %s --split-input-file --dc-fold-head-transposes | FileCheck %s
// With if-target-folds, only where the module's target folds them: h200
// does, cpu does not (its attention is expanded over [B, H, S, D]).
// RUN: dc-opt %s --split-input-file --dc-attach-target=target=h200 --dc-fold-head-transposes=if-target-folds=1 | FileCheck %s
// RUN: dc-opt %s --split-input-file --dc-attach-target=target=cpu --dc-fold-head-transposes=if-target-folds=1 | FileCheck %s --check-prefix=CPU
// CPU-LABEL: func.func @layer
// CPU: linalg.transpose
// CPU: dc.attention %{{.*}}, %{{.*}}, %{{.*}} causal scale

// A layer's attention as the generator writes it: q, k, v column slices of
// the fused projection, split into heads and transposed to [B*H, S, D]; the
// context transposed back to [B*S, H*D]; the backward's output gradient
// likewise, and dq, dk, dv transposed back into the fused gradient. Every
// transpose goes: the ops read the [B, S, H, D] views, the context is o
// collapsed, and lse is [B, H, S].
// CHECK-LABEL: func.func @layer
// CHECK-SAME: %[[QKV:[a-z0-9]+]]: tensor<16x48xbf16>, %[[DCTX:[a-z0-9]+]]: tensor<16x16xbf16>
// CHECK-NOT: linalg.transpose
// CHECK: %[[QS:.*]] = tensor.extract_slice %[[QKV]][0, 0] [16, 16] [1, 1]
// CHECK: %[[Q:.*]] = tensor.expand_shape %[[QS]] {{\[}}[0, 1], [2, 3]] output_shape [2, 8, 2, 8]
// CHECK: %[[KS:.*]] = tensor.extract_slice %[[QKV]][0, 16] [16, 16] [1, 1]
// CHECK: %[[K:.*]] = tensor.expand_shape %[[KS]]
// CHECK: %[[VS:.*]] = tensor.extract_slice %[[QKV]][0, 32] [16, 16] [1, 1]
// CHECK: %[[V:.*]] = tensor.expand_shape %[[VS]]
// CHECK: %[[O:.*]], %[[LSE:.*]] = dc.attention %[[Q]], %[[K]], %[[V]] causal bshd scale = 0.353553385 : tensor<2x8x2x8xbf16>, tensor<2x8x2x8xbf16>, tensor<2x8x2x8xbf16> -> tensor<2x8x2x8xbf16>, tensor<2x2x8xf32>
// CHECK: %[[CTX:.*]] = tensor.collapse_shape %[[O]] {{\[}}[0, 1], [2, 3]] : tensor<2x8x2x8xbf16> into tensor<16x16xbf16>
// CHECK: %[[DO:.*]] = tensor.expand_shape %[[DCTX]] {{\[}}[0, 1], [2, 3]] output_shape [2, 8, 2, 8]
// CHECK: %[[DQ:.*]], %[[DK:.*]], %[[DV:.*]] = dc.attention_grad %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %[[DO]] causal bshd
// CHECK: %[[DQ2:.*]] = tensor.collapse_shape %[[DQ]] {{\[}}[0, 1], [2, 3]]
// CHECK: tensor.insert_slice %[[DQ2]] into %{{.*}}[0, 0] [16, 16] [1, 1]
// CHECK: %[[DK2:.*]] = tensor.collapse_shape %[[DK]]
// CHECK: tensor.insert_slice %[[DK2]] into %{{.*}}[0, 16] [16, 16] [1, 1]
// CHECK: %[[DV2:.*]] = tensor.collapse_shape %[[DV]]
// CHECK: %[[DQKV:.*]] = tensor.insert_slice %[[DV2]] into %{{.*}}[0, 32] [16, 16] [1, 1]
// CHECK: return %[[CTX]], %[[DQKV]]
func.func @layer(%qkv: tensor<16x48xbf16>, %dctx_2d: tensor<16x16xbf16>) -> (tensor<16x16xbf16>, tensor<16x48xbf16>) {
  %q_2d = tensor.extract_slice %qkv[0, 0] [16, 16] [1, 1] : tensor<16x48xbf16> to tensor<16x16xbf16>
  %q_4d = tensor.expand_shape %q_2d [[0, 1], [2, 3]] output_shape [2, 8, 2, 8] : tensor<16x16xbf16> into tensor<2x8x2x8xbf16>
  %i0 = tensor.empty() : tensor<2x2x8x8xbf16>
  %q_t = linalg.transpose ins(%q_4d : tensor<2x8x2x8xbf16>) outs(%i0 : tensor<2x2x8x8xbf16>) permutation = [0, 2, 1, 3]
  %q = tensor.collapse_shape %q_t [[0, 1], [2], [3]] : tensor<2x2x8x8xbf16> into tensor<4x8x8xbf16>
  %k_2d = tensor.extract_slice %qkv[0, 16] [16, 16] [1, 1] : tensor<16x48xbf16> to tensor<16x16xbf16>
  %k_4d = tensor.expand_shape %k_2d [[0, 1], [2, 3]] output_shape [2, 8, 2, 8] : tensor<16x16xbf16> into tensor<2x8x2x8xbf16>
  %i1 = tensor.empty() : tensor<2x2x8x8xbf16>
  %k_t = linalg.transpose ins(%k_4d : tensor<2x8x2x8xbf16>) outs(%i1 : tensor<2x2x8x8xbf16>) permutation = [0, 2, 1, 3]
  %k = tensor.collapse_shape %k_t [[0, 1], [2], [3]] : tensor<2x2x8x8xbf16> into tensor<4x8x8xbf16>
  %v_2d = tensor.extract_slice %qkv[0, 32] [16, 16] [1, 1] : tensor<16x48xbf16> to tensor<16x16xbf16>
  %v_4d = tensor.expand_shape %v_2d [[0, 1], [2, 3]] output_shape [2, 8, 2, 8] : tensor<16x16xbf16> into tensor<2x8x2x8xbf16>
  %i2 = tensor.empty() : tensor<2x2x8x8xbf16>
  %v_t = linalg.transpose ins(%v_4d : tensor<2x8x2x8xbf16>) outs(%i2 : tensor<2x2x8x8xbf16>) permutation = [0, 2, 1, 3]
  %v = tensor.collapse_shape %v_t [[0, 1], [2], [3]] : tensor<2x2x8x8xbf16> into tensor<4x8x8xbf16>
  %ctx, %lse = dc.attention %q, %k, %v causal scale = 0.35355339059327373 : tensor<4x8x8xbf16>, tensor<4x8x8xbf16>, tensor<4x8x8xbf16> -> tensor<4x8x8xbf16>, tensor<4x8xf32>
  %ctx_4d = tensor.expand_shape %ctx [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xbf16> into tensor<2x2x8x8xbf16>
  %i3 = tensor.empty() : tensor<2x8x2x8xbf16>
  %ctx_t = linalg.transpose ins(%ctx_4d : tensor<2x2x8x8xbf16>) outs(%i3 : tensor<2x8x2x8xbf16>) permutation = [0, 2, 1, 3]
  %ctx_2d = tensor.collapse_shape %ctx_t [[0, 1], [2, 3]] : tensor<2x8x2x8xbf16> into tensor<16x16xbf16>
  %dctx_4d = tensor.expand_shape %dctx_2d [[0, 1], [2, 3]] output_shape [2, 8, 2, 8] : tensor<16x16xbf16> into tensor<2x8x2x8xbf16>
  %i4 = tensor.empty() : tensor<2x2x8x8xbf16>
  %dctx_t = linalg.transpose ins(%dctx_4d : tensor<2x8x2x8xbf16>) outs(%i4 : tensor<2x2x8x8xbf16>) permutation = [0, 2, 1, 3]
  %dctx = tensor.collapse_shape %dctx_t [[0, 1], [2], [3]] : tensor<2x2x8x8xbf16> into tensor<4x8x8xbf16>
  %dq, %dk, %dv = dc.attention_grad %q, %k, %v, %ctx, %lse, %dctx causal scale = 0.35355339059327373 : tensor<4x8x8xbf16>, tensor<4x8x8xbf16>, tensor<4x8x8xbf16>, tensor<4x8x8xbf16>, tensor<4x8xf32>, tensor<4x8x8xbf16> -> tensor<4x8x8xbf16>, tensor<4x8x8xbf16>, tensor<4x8x8xbf16>
  %i5 = tensor.empty() : tensor<16x48xbf16>
  %dq_4d = tensor.expand_shape %dq [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xbf16> into tensor<2x2x8x8xbf16>
  %i6 = tensor.empty() : tensor<2x8x2x8xbf16>
  %dq_t = linalg.transpose ins(%dq_4d : tensor<2x2x8x8xbf16>) outs(%i6 : tensor<2x8x2x8xbf16>) permutation = [0, 2, 1, 3]
  %dq_2d = tensor.collapse_shape %dq_t [[0, 1], [2, 3]] : tensor<2x8x2x8xbf16> into tensor<16x16xbf16>
  %dqkv = tensor.insert_slice %dq_2d into %i5[0, 0] [16, 16] [1, 1] : tensor<16x16xbf16> into tensor<16x48xbf16>
  %dk_4d = tensor.expand_shape %dk [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xbf16> into tensor<2x2x8x8xbf16>
  %i7 = tensor.empty() : tensor<2x8x2x8xbf16>
  %dk_t = linalg.transpose ins(%dk_4d : tensor<2x2x8x8xbf16>) outs(%i7 : tensor<2x8x2x8xbf16>) permutation = [0, 2, 1, 3]
  %dk_2d = tensor.collapse_shape %dk_t [[0, 1], [2, 3]] : tensor<2x8x2x8xbf16> into tensor<16x16xbf16>
  %dqkv2 = tensor.insert_slice %dk_2d into %dqkv[0, 16] [16, 16] [1, 1] : tensor<16x16xbf16> into tensor<16x48xbf16>
  %dv_4d = tensor.expand_shape %dv [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xbf16> into tensor<2x2x8x8xbf16>
  %i8 = tensor.empty() : tensor<2x8x2x8xbf16>
  %dv_t = linalg.transpose ins(%dv_4d : tensor<2x2x8x8xbf16>) outs(%i8 : tensor<2x8x2x8xbf16>) permutation = [0, 2, 1, 3]
  %dv_2d = tensor.collapse_shape %dv_t [[0, 1], [2, 3]] : tensor<2x8x2x8xbf16> into tensor<16x16xbf16>
  %dqkv3 = tensor.insert_slice %dv_2d into %dqkv2[0, 32] [16, 16] [1, 1] : tensor<16x16xbf16> into tensor<16x48xbf16>
  return %ctx_2d, %dqkv3 : tensor<16x16xbf16>, tensor<16x48xbf16>
}

// -----

// [B, H, S, D] operands (no collapse): the same fold, the results' users
// read the inverse transposes, which cancel against theirs.
// CHECK-LABEL: func.func @heads_dim_kept
// CHECK-NOT: linalg.transpose
// CHECK: %[[O:.*]], %{{.*}} = dc.attention %arg0, %arg1, %arg1 bshd scale = 5.000000e-01 : tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16> -> tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>
// CHECK: return %[[O]]
func.func @heads_dim_kept(%q: tensor<2x8x4x16xbf16>, %kv: tensor<2x8x4x16xbf16>) -> tensor<2x8x4x16xbf16> {
  %i0 = tensor.empty() : tensor<2x4x8x16xbf16>
  %qt = linalg.transpose ins(%q : tensor<2x8x4x16xbf16>) outs(%i0 : tensor<2x4x8x16xbf16>) permutation = [0, 2, 1, 3]
  %i1 = tensor.empty() : tensor<2x4x8x16xbf16>
  %kt = linalg.transpose ins(%kv : tensor<2x8x4x16xbf16>) outs(%i1 : tensor<2x4x8x16xbf16>) permutation = [0, 2, 1, 3]
  %o, %lse = dc.attention %qt, %kt, %kt scale = 0.5 : tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16> -> tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>
  %i2 = tensor.empty() : tensor<2x8x4x16xbf16>
  %ot = linalg.transpose ins(%o : tensor<2x4x8x16xbf16>) outs(%i2 : tensor<2x8x4x16xbf16>) permutation = [0, 2, 1, 3]
  return %ot : tensor<2x8x4x16xbf16>
}

// -----

// A user that wants the [B*H, S, D] result itself gets the inverse
// transpose (one transpose instead of four).
// CHECK-LABEL: func.func @result_used_as_is
// CHECK: %[[O:.*]], %{{.*}} = dc.attention {{.*}} bshd
// CHECK: %[[T:.*]] = linalg.transpose ins(%[[O]] : tensor<2x8x4x16xbf16>) outs(%{{.*}} : tensor<2x4x8x16xbf16>) permutation = [0, 2, 1, 3]
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[T]] {{\[}}[0, 1], [2], [3]] : tensor<2x4x8x16xbf16> into tensor<8x8x16xbf16>
// CHECK: return %[[C]]
func.func @result_used_as_is(%q: tensor<2x8x4x16xbf16>) -> tensor<8x8x16xbf16> {
  %i0 = tensor.empty() : tensor<2x4x8x16xbf16>
  %qt = linalg.transpose ins(%q : tensor<2x8x4x16xbf16>) outs(%i0 : tensor<2x4x8x16xbf16>) permutation = [0, 2, 1, 3]
  %q3 = tensor.collapse_shape %qt [[0, 1], [2], [3]] : tensor<2x4x8x16xbf16> into tensor<8x8x16xbf16>
  %o, %lse = dc.attention %q3, %q3, %q3 causal scale = 0.25 : tensor<8x8x16xbf16>, tensor<8x8x16xbf16>, tensor<8x8x16xbf16> -> tensor<8x8x16xbf16>, tensor<8x8xf32>
  return %o : tensor<8x8x16xbf16>
}

// -----

// Not folded: grouped-query attention (4 query heads over 2 key/value
// heads: the runtime has no strided grouped form), and an operand that is
// not a head transpose.
// CHECK-LABEL: func.func @grouped
// CHECK-COUNT-2: linalg.transpose
// CHECK: dc.attention %{{.*}} scale
// CHECK-NOT: bshd
func.func @grouped(%q: tensor<2x8x4x16xbf16>, %kv: tensor<2x8x2x16xbf16>) -> tensor<2x4x8x16xbf16> {
  %i0 = tensor.empty() : tensor<2x4x8x16xbf16>
  %qt = linalg.transpose ins(%q : tensor<2x8x4x16xbf16>) outs(%i0 : tensor<2x4x8x16xbf16>) permutation = [0, 2, 1, 3]
  %i1 = tensor.empty() : tensor<2x2x8x16xbf16>
  %kt = linalg.transpose ins(%kv : tensor<2x8x2x16xbf16>) outs(%i1 : tensor<2x2x8x16xbf16>) permutation = [0, 2, 1, 3]
  %o, %lse = dc.attention %qt, %kt, %kt scale = 0.5 : tensor<2x4x8x16xbf16>, tensor<2x2x8x16xbf16>, tensor<2x2x8x16xbf16> -> tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>
  return %o : tensor<2x4x8x16xbf16>
}

// CHECK-LABEL: func.func @not_a_transpose
// CHECK: linalg.transpose
// CHECK: dc.attention %{{.*}}, %{{.*}}, %arg1 scale
// CHECK-NOT: bshd
func.func @not_a_transpose(%q: tensor<2x8x4x16xbf16>, %v: tensor<2x4x8x16xbf16>) -> tensor<2x4x8x16xbf16> {
  %i0 = tensor.empty() : tensor<2x4x8x16xbf16>
  %qt = linalg.transpose ins(%q : tensor<2x8x4x16xbf16>) outs(%i0 : tensor<2x4x8x16xbf16>) permutation = [0, 2, 1, 3]
  %o, %lse = dc.attention %qt, %qt, %v scale = 0.5 : tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x8x16xbf16> -> tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>
  return %o : tensor<2x4x8x16xbf16>
}

// Not folded: q's [B*H] = 8 is 2 x 4 and k's 4 is 1 x 4: as many heads,
// but grouped over the collapsed batch (two query entries per key entry),
// which has no [B, S, H, D] form.
// CHECK-LABEL: func.func @other_split
// CHECK: dc.attention %{{.*}} scale
// CHECK-NOT: bshd
func.func @other_split(%q: tensor<2x8x4x16xbf16>, %kv: tensor<1x8x4x16xbf16>) -> tensor<8x8x16xbf16> {
  %i0 = tensor.empty() : tensor<2x4x8x16xbf16>
  %qt = linalg.transpose ins(%q : tensor<2x8x4x16xbf16>) outs(%i0 : tensor<2x4x8x16xbf16>) permutation = [0, 2, 1, 3]
  %q3 = tensor.collapse_shape %qt [[0, 1], [2], [3]] : tensor<2x4x8x16xbf16> into tensor<8x8x16xbf16>
  %i1 = tensor.empty() : tensor<1x4x8x16xbf16>
  %kt = linalg.transpose ins(%kv : tensor<1x8x4x16xbf16>) outs(%i1 : tensor<1x4x8x16xbf16>) permutation = [0, 2, 1, 3]
  %k3 = tensor.collapse_shape %kt [[0, 1], [2], [3]] : tensor<1x4x8x16xbf16> into tensor<4x8x16xbf16>
  %o, %lse = dc.attention %q3, %k3, %k3 scale = 0.5 : tensor<8x8x16xbf16>, tensor<4x8x16xbf16>, tensor<4x8x16xbf16> -> tensor<8x8x16xbf16>, tensor<8x8xf32>
  return %o : tensor<8x8x16xbf16>
}

// -----

// Not folded: f32 attention, which the GPU lowering expands to linalg
// over [B, H, S, D] (only 16-bit attention runs in the runtime's flash
// attention, on strided operands).
// CHECK-LABEL: func.func @f32_expanded
// CHECK: linalg.transpose
// CHECK: dc.attention %{{.*}} scale
// CHECK-NOT: bshd
func.func @f32_expanded(%q: tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32> {
  %i0 = tensor.empty() : tensor<2x4x8x16xf32>
  %qt = linalg.transpose ins(%q : tensor<2x8x4x16xf32>) outs(%i0 : tensor<2x4x8x16xf32>) permutation = [0, 2, 1, 3]
  %o, %lse = dc.attention %qt, %qt, %qt scale = 0.5 : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>, tensor<2x4x8xf32>
  return %o : tensor<2x4x8x16xf32>
}
