// RUN: dc-opt %s --dc-expand-attention | FileCheck %s
// RUN: dc-opt %s --dc-expand-attention=keep-fused=true | FileCheck %s --check-prefix=KEEP

// The bshd form expands as the [B, H, S, D] op between head transposes:
// q, k, v (and the backward's o and do) transposed in, the results
// transposed back; lse is [B, H, S] in both forms, so it passes as is.
// With keep-fused too (f32: no flash kernel).
// CHECK-LABEL: func.func @forward
// KEEP-LABEL: func.func @forward
// KEEP-NOT: dc.attention
// KEEP: linalg.generic
// CHECK-SAME: (%[[Q:.*]]: tensor<2x8x4x16xf32>, %[[K:.*]]: tensor<2x8x4x16xf32>)
// CHECK: %[[QT:.*]] = linalg.transpose ins(%[[Q]] : tensor<2x8x4x16xf32>) outs(%{{.*}} : tensor<2x4x8x16xf32>) permutation = [0, 2, 1, 3]
// CHECK: %[[KT:.*]] = linalg.transpose ins(%[[K]] : tensor<2x8x4x16xf32>) outs(%{{.*}} : tensor<2x4x8x16xf32>) permutation = [0, 2, 1, 3]
// CHECK: linalg.transpose ins(%[[K]] : tensor<2x8x4x16xf32>)
// CHECK-NOT: dc.attention
// CHECK: linalg.generic
// CHECK: %[[OT:.*]] = linalg.transpose ins(%{{.*}} : tensor<2x4x8x16xf32>) outs(%{{.*}} : tensor<2x8x4x16xf32>) permutation = [0, 2, 1, 3]
// CHECK: return %[[OT]], %{{.*}} : tensor<2x8x4x16xf32>, tensor<2x4x8xf32>
func.func @forward(%q: tensor<2x8x4x16xf32>, %k: tensor<2x8x4x16xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x4x8xf32>) {
  %o, %lse = dc.attention %q, %k, %k causal bshd scale = 0.25 : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32> -> tensor<2x8x4x16xf32>, tensor<2x4x8xf32>
  return %o, %lse : tensor<2x8x4x16xf32>, tensor<2x4x8xf32>
}

// CHECK-LABEL: func.func @backward
// CHECK-SAME: %[[LSE:[a-z0-9]+]]: tensor<2x4x8xf32>
// CHECK-COUNT-5: linalg.transpose {{.*}} outs(%{{.*}} : tensor<2x4x8x16xf32>) permutation = [0, 2, 1, 3]
// CHECK-NOT: dc.attention_grad
// CHECK-COUNT-3: linalg.transpose {{.*}} outs(%{{.*}} : tensor<2x8x4x16xf32>) permutation = [0, 2, 1, 3]
// CHECK: return
func.func @backward(%q: tensor<2x8x4x16xf32>, %lse: tensor<2x4x8xf32>) -> (tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>) {
  %dq, %dk, %dv = dc.attention_grad %q, %q, %q, %q, %lse, %q causal bshd scale = 0.25 : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x4x8xf32>, tensor<2x8x4x16xf32> -> tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
  return %dq, %dk, %dv : tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>, tensor<2x8x4x16xf32>
}

// With keep-fused (the GPU target), bf16 ops stay fused: a bshd op as it
// is, but a grouped-query bshd op (2 k/v heads for 4 query heads) as the
// [B, H, S, D] op between transposes, the one grouped layout the runtime's
// flash attention reads.
// KEEP-LABEL: func.func @kept_bf16
// KEEP-NOT: linalg.transpose
// KEEP: dc.attention %{{.*}} causal bshd scale
// KEEP-NOT: linalg.transpose
// KEEP: return
// KEEP-LABEL: func.func @kept_grouped_bf16
// KEEP-SAME: (%[[Q:.*]]: tensor<2x8x4x16xbf16>, %[[K:.*]]: tensor<2x8x2x16xbf16>)
// KEEP: %[[QT:.*]] = linalg.transpose ins(%[[Q]] : tensor<2x8x4x16xbf16>) {{.*}} permutation = [0, 2, 1, 3]
// KEEP: %[[KT:.*]] = linalg.transpose ins(%[[K]] : tensor<2x8x2x16xbf16>) {{.*}} permutation = [0, 2, 1, 3]
// KEEP: %[[VT:.*]] = linalg.transpose ins(%[[K]] : tensor<2x8x2x16xbf16>)
// KEEP: %[[O:.*]], %[[LSE:.*]] = dc.attention %[[QT]], %[[KT]], %[[VT]] causal scale = {{.*}} : tensor<2x4x8x16xbf16>, tensor<2x2x8x16xbf16>, tensor<2x2x8x16xbf16> -> tensor<2x4x8x16xbf16>, tensor<2x4x8xf32>
// KEEP: %[[OT:.*]] = linalg.transpose ins(%[[O]] : tensor<2x4x8x16xbf16>) {{.*}} permutation = [0, 2, 1, 3]
// KEEP: return %[[OT]], %[[LSE]]
// KEEP-LABEL: func.func @kept_grouped_backward_bf16
// KEEP-COUNT-5: linalg.transpose
// KEEP: dc.attention_grad %{{.*}} causal scale
// KEEP-COUNT-3: linalg.transpose
// KEEP: return
func.func @kept_bf16(%q: tensor<2x8x4x16xbf16>, %k: tensor<2x8x4x16xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>) {
  %o, %lse = dc.attention %q, %k, %k causal bshd scale = 0.25 : tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x8x4x16xbf16> -> tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>
  return %o, %lse : tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>
}

func.func @kept_grouped_bf16(%q: tensor<2x8x4x16xbf16>, %k: tensor<2x8x2x16xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>) {
  %o, %lse = dc.attention %q, %k, %k causal bshd scale = 0.25 : tensor<2x8x4x16xbf16>, tensor<2x8x2x16xbf16>, tensor<2x8x2x16xbf16> -> tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>
  return %o, %lse : tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>
}

func.func @kept_grouped_backward_bf16(%q: tensor<2x8x4x16xbf16>, %k: tensor<2x8x2x16xbf16>, %lse: tensor<2x4x8xf32>) -> (tensor<2x8x4x16xbf16>, tensor<2x8x2x16xbf16>, tensor<2x8x2x16xbf16>) {
  %dq, %dk, %dv = dc.attention_grad %q, %k, %k, %q, %lse, %q causal bshd scale = 0.25 : tensor<2x8x4x16xbf16>, tensor<2x8x2x16xbf16>, tensor<2x8x2x16xbf16>, tensor<2x8x4x16xbf16>, tensor<2x4x8xf32>, tensor<2x8x4x16xbf16> -> tensor<2x8x4x16xbf16>, tensor<2x8x2x16xbf16>, tensor<2x8x2x16xbf16>
  return %dq, %dk, %dv : tensor<2x8x4x16xbf16>, tensor<2x8x2x16xbf16>, tensor<2x8x2x16xbf16>
}
