// RUN: dc-opt %s --dc-expand-attention | FileCheck %s

// dc.attention: scores, scale and mask, row max, sum of exps, lse,
// probabilities, the product with v; all in f32. test/Examples/
// gradcheck-fused.test checks the numbers.

// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[Q:.*]]: tensor<2x4x3xf32>, %[[K:.*]]: tensor<2x4x3xf32>, %[[V:.*]]: tensor<2x4x3xf32>)
// CHECK: %[[SCALE:.*]] = arith.constant 5.000000e-01 : f32
// CHECK: %[[S:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[Q]], %[[K]] : {{.*}}) outs({{.*}} : tensor<2x4x4xf32>)
// CHECK: %[[NEG_INF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[Z:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<2x4x4xf32>)
// CHECK:   arith.mulf %{{.*}}, %[[SCALE]]
// CHECK:   %[[I:.*]] = linalg.index 1
// CHECK:   %[[J:.*]] = linalg.index 2
// CHECK:   %[[ABOVE:.*]] = arith.cmpi ugt, %[[J]], %[[I]]
// CHECK:   arith.select %[[ABOVE]], %[[NEG_INF]]
// CHECK: %[[MAX:.*]] = linalg.generic {{.*}} ins(%[[Z]] : tensor<2x4x4xf32>) outs({{.*}} : tensor<2x4xf32>)
// CHECK:   arith.maximumf
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[Z]], %[[MAX]] : {{.*}}) outs({{.*}} : tensor<2x4xf32>)
// CHECK:   math.exp
// CHECK: %[[LSE:.*]] = linalg.generic {{.*}} ins(%[[MAX]], %[[SUM]] : {{.*}})
// CHECK:   math.log
// CHECK: %[[P:.*]] = linalg.generic {{.*}} ins(%[[Z]], %[[LSE]] : {{.*}}) outs({{.*}} : tensor<2x4x4xf32>)
// CHECK: %[[O:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction", "parallel"]} ins(%[[P]], %[[V]] : {{.*}}) outs({{.*}} : tensor<2x4x3xf32>)
// CHECK: return %[[O]], %[[LSE]]
func.func @forward(%q: tensor<2x4x3xf32>, %k: tensor<2x4x3xf32>, %v: tensor<2x4x3xf32>) -> (tensor<2x4x3xf32>, tensor<2x4xf32>) {
  %o, %lse = dc.attention %q, %k, %v causal scale = 0.5 : tensor<2x4x3xf32>, tensor<2x4x3xf32>, tensor<2x4x3xf32> -> tensor<2x4x3xf32>, tensor<2x4xf32>
  return %o, %lse : tensor<2x4x3xf32>, tensor<2x4xf32>
}

// dc.attention_grad on [B, H, S, D] bf16 with 5 queries and 7 keys, not
// causal: the probabilities are recomputed from lse, the row term is
// sum_d do o, products accumulate in f32 and each gradient is rounded once.

// CHECK-LABEL: func.func @backward(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<2x3x5x8xbf16>, %[[KV:[^:]*]]: tensor<2x3x7x8xbf16>, %[[O:[^:]*]]: tensor<2x3x5x8xbf16>, %[[LSE:[^:]*]]: tensor<2x3x5xf32>, %[[DO:[^:]*]]: tensor<2x3x5x8xbf16>)
// CHECK-NOT: 0xFF800000
// CHECK-NOT: dc.attention
// CHECK: %[[S:.*]] = linalg.generic {{.*}} ins(%[[Q]], %[[KV]] : {{.*}}) outs({{.*}} : tensor<2x3x5x7xf32>)
// CHECK:   arith.extf
// CHECK: %[[Z:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<2x3x5x7xf32>)
// CHECK-NOT: linalg.index
// CHECK: %[[P:.*]] = linalg.generic {{.*}} ins(%[[Z]], %[[LSE]] : {{.*}}) outs({{.*}} : tensor<2x3x5x7xf32>)
// CHECK: %[[DP:.*]] = linalg.generic {{.*}} ins(%[[DO]], %[[KV]] : {{.*}}) outs({{.*}} : tensor<2x3x5x7xf32>)
// CHECK: %[[DELTA:.*]] = linalg.generic {{.*}} ins(%[[DO]], %[[O]] : {{.*}}) outs({{.*}} : tensor<2x3x5xf32>)
// CHECK: %[[DS:.*]] = linalg.generic {{.*}} ins(%[[P]], %[[DP]], %[[DELTA]] : {{.*}}) outs({{.*}} : tensor<2x3x5x7xf32>)
// CHECK: %[[DQ:.*]] = linalg.generic {{.*}} ins(%[[DS]], %[[KV]] : {{.*}}) outs({{.*}} : tensor<2x3x5x8xf32>)
// CHECK: %[[DK:.*]] = linalg.generic {{.*}} ins(%[[DS]], %[[Q]] : {{.*}}) outs({{.*}} : tensor<2x3x7x8xf32>)
// CHECK: %[[DV:.*]] = linalg.generic {{.*}} ins(%[[P]], %[[DO]] : {{.*}}) outs({{.*}} : tensor<2x3x7x8xf32>)
// CHECK: %[[DQ16:.*]] = linalg.generic {{.*}} ins(%[[DQ]] : tensor<2x3x5x8xf32>) outs({{.*}} : tensor<2x3x5x8xbf16>)
// CHECK:   arith.truncf
// CHECK: %[[DK16:.*]] = linalg.generic {{.*}} ins(%[[DK]] : tensor<2x3x7x8xf32>) outs({{.*}} : tensor<2x3x7x8xbf16>)
// CHECK: %[[DV16:.*]] = linalg.generic {{.*}} ins(%[[DV]] : tensor<2x3x7x8xf32>) outs({{.*}} : tensor<2x3x7x8xbf16>)
// CHECK: return %[[DQ16]], %[[DK16]], %[[DV16]]
func.func @backward(%q: tensor<2x3x5x8xbf16>, %kv: tensor<2x3x7x8xbf16>, %o: tensor<2x3x5x8xbf16>, %lse: tensor<2x3x5xf32>, %do: tensor<2x3x5x8xbf16>) -> (tensor<2x3x5x8xbf16>, tensor<2x3x7x8xbf16>, tensor<2x3x7x8xbf16>) {
  %dq, %dk, %dv = dc.attention_grad %q, %kv, %kv, %o, %lse, %do scale = 0.125 : tensor<2x3x5x8xbf16>, tensor<2x3x7x8xbf16>, tensor<2x3x7x8xbf16>, tensor<2x3x5x8xbf16>, tensor<2x3x5xf32>, tensor<2x3x5x8xbf16> -> tensor<2x3x5x8xbf16>, tensor<2x3x7x8xbf16>, tensor<2x3x7x8xbf16>
  return %dq, %dk, %dv : tensor<2x3x5x8xbf16>, tensor<2x3x7x8xbf16>, tensor<2x3x7x8xbf16>
}
