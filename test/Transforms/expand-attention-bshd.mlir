// RUN: dc-opt %s --dc-expand-attention | FileCheck %s

// The bshd form expands as the [B, H, S, D] op between head transposes:
// q, k, v (and the backward's o and do) transposed in, the results
// transposed back; lse is [B, H, S] in both forms, so it passes as is.
// CHECK-LABEL: func.func @forward
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
