// RUN: dc-opt %s --split-input-file --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map unknown-type-conversion=identity-layout-map" | FileCheck %s

// A fused attention op left for the runtime (dc-expand-attention
// keep-fused) bufferizes to its buffer form: operands read in place,
// outputs freshly allocated (memref.alloc, for dc-assign-step-arena).

!qkv = tensor<8x16x4xbf16>
!lse = tensor<8x16xf32>

// CHECK-LABEL: func.func @forward_backward
// CHECK-SAME: (%[[Q:.*]]: memref<8x16x4xbf16>, %[[K:.*]]: memref<8x16x4xbf16>, %[[V:.*]]: memref<8x16x4xbf16>, %[[DO:.*]]: memref<8x16x4xbf16>)
// CHECK: %[[O:.*]] = memref.alloc() {{.*}}: memref<8x16x4xbf16>
// CHECK: %[[LSE:.*]] = memref.alloc() {{.*}}: memref<8x16xf32>
// CHECK: dc.attention_into %[[Q]], %[[K]], %[[V]] into %[[O]], %[[LSE]] causal scale = 5.000000e-01
// CHECK: %[[DQ:.*]] = memref.alloc() {{.*}}: memref<8x16x4xbf16>
// CHECK: %[[DK:.*]] = memref.alloc() {{.*}}: memref<8x16x4xbf16>
// CHECK: %[[DV:.*]] = memref.alloc() {{.*}}: memref<8x16x4xbf16>
// CHECK: dc.attention_grad_into %[[Q]], %[[K]], %[[V]], %[[O]], %[[LSE]], %[[DO]] into %[[DQ]], %[[DK]], %[[DV]] causal scale = 5.000000e-01
// CHECK-NOT: memref.copy
// CHECK: return %[[O]], %[[DQ]], %[[DK]], %[[DV]]
func.func @forward_backward(%q: !qkv, %k: !qkv, %v: !qkv, %do: !qkv)
    -> (!qkv, !qkv, !qkv, !qkv) {
  %o, %lse = dc.attention %q, %k, %v causal scale = 0.5
      : !qkv, !qkv, !qkv -> !qkv, !lse
  %dq, %dk, %dv = dc.attention_grad %q, %k, %v, %o, %lse, %do causal
      scale = 0.5 : !qkv, !qkv, !qkv, !qkv, !lse, !qkv -> !qkv, !qkv, !qkv
  return %o, %dq, %dk, %dv : !qkv, !qkv, !qkv, !qkv
}

// -----

// An operand that bufferizes to a strided view (a slice) is copied to a
// dense buffer first: the runtime takes dense row-major buffers.

// CHECK-LABEL: func.func @strided_operand
// CHECK: %[[SLICE:.*]] = memref.subview
// CHECK: %[[DENSE:.*]] = memref.alloc() {{.*}}: memref<2x4x3xbf16>
// CHECK: memref.copy %[[SLICE]], %[[DENSE]]
// CHECK: dc.attention_into %[[DENSE]], %{{.*}}, %{{.*}} into %{{.*}}, %{{.*}} scale
func.func @strided_operand(%big: tensor<2x8x3xbf16>, %k: tensor<2x4x3xbf16>)
    -> (tensor<2x4x3xbf16>, tensor<2x4xf32>) {
  %q = tensor.extract_slice %big[0, 2, 0] [2, 4, 3] [1, 1, 1]
      : tensor<2x8x3xbf16> to tensor<2x4x3xbf16>
  %o, %lse = dc.attention %q, %k, %k scale = 0.25
      : tensor<2x4x3xbf16>, tensor<2x4x3xbf16>, tensor<2x4x3xbf16>
        -> tensor<2x4x3xbf16>, tensor<2x4xf32>
  return %o, %lse : tensor<2x4x3xbf16>, tensor<2x4xf32>
}

// -----

// The bshd form reads strided views in place: q, k and v are column slices
// of one fused projection, split into heads; o and lse are fresh dense
// buffers, and the backward writes fresh dq, dk, dv. No copy.
// CHECK-LABEL: func.func @bshd_slices
// CHECK-SAME: (%[[QKV:.*]]: memref<16x48xbf16>, %[[DO:.*]]: memref<2x8x2x8xbf16>)
// CHECK: %[[QS:.*]] = memref.subview %[[QKV]][0, 0] [16, 16] [1, 1]
// CHECK: %[[Q:.*]] = memref.expand_shape %[[QS]] {{\[}}[0, 1], [2, 3]] output_shape [2, 8, 2, 8] : memref<16x16xbf16, strided<[48, 1]>> into memref<2x8x2x8xbf16, strided<[384, 48, 8, 1]>>
// CHECK: %[[KS:.*]] = memref.subview %[[QKV]][0, 16] [16, 16] [1, 1]
// CHECK: %[[K:.*]] = memref.expand_shape %[[KS]]
// CHECK: %[[O:.*]] = memref.alloc() {{.*}}: memref<2x8x2x8xbf16>
// CHECK: %[[LSE:.*]] = memref.alloc() {{.*}}: memref<2x2x8xf32>
// CHECK: dc.attention_into %[[Q]], %[[K]], %[[K]] into %[[O]], %[[LSE]] causal bshd scale = 5.000000e-01 : memref<2x8x2x8xbf16, strided<[384, 48, 8, 1]>>, memref<2x8x2x8xbf16, strided<[384, 48, 8, 1], offset: 16>>, memref<2x8x2x8xbf16, strided<[384, 48, 8, 1], offset: 16>> into memref<2x8x2x8xbf16>, memref<2x2x8xf32>
// CHECK: dc.attention_grad_into %[[Q]], %[[K]], %[[K]], %[[O]], %[[LSE]], %[[DO]] into %{{.*}}, %{{.*}}, %{{.*}} causal bshd
// CHECK-NOT: memref.copy
func.func @bshd_slices(%qkv: tensor<16x48xbf16>, %do: tensor<2x8x2x8xbf16>) -> (tensor<2x8x2x8xbf16>, tensor<2x8x2x8xbf16>) {
  %qs = tensor.extract_slice %qkv[0, 0] [16, 16] [1, 1] : tensor<16x48xbf16> to tensor<16x16xbf16>
  %q = tensor.expand_shape %qs [[0, 1], [2, 3]] output_shape [2, 8, 2, 8] : tensor<16x16xbf16> into tensor<2x8x2x8xbf16>
  %ks = tensor.extract_slice %qkv[0, 16] [16, 16] [1, 1] : tensor<16x48xbf16> to tensor<16x16xbf16>
  %k = tensor.expand_shape %ks [[0, 1], [2, 3]] output_shape [2, 8, 2, 8] : tensor<16x16xbf16> into tensor<2x8x2x8xbf16>
  %o, %lse = dc.attention %q, %k, %k causal bshd scale = 0.5 : tensor<2x8x2x8xbf16>, tensor<2x8x2x8xbf16>, tensor<2x8x2x8xbf16> -> tensor<2x8x2x8xbf16>, tensor<2x2x8xf32>
  %dq, %dk, %dv = dc.attention_grad %q, %k, %k, %o, %lse, %do causal bshd scale = 0.5 : tensor<2x8x2x8xbf16>, tensor<2x8x2x8xbf16>, tensor<2x8x2x8xbf16>, tensor<2x8x2x8xbf16>, tensor<2x2x8xf32>, tensor<2x8x2x8xbf16> -> tensor<2x8x2x8xbf16>, tensor<2x8x2x8xbf16>, tensor<2x8x2x8xbf16>
  return %o, %dq : tensor<2x8x2x8xbf16>, tensor<2x8x2x8xbf16>
}
