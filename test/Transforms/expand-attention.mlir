// RUN: dc-opt %s --dc-expand-attention | FileCheck %s
// RUN: dc-opt %s --dc-expand-attention | FileCheck %s --check-prefix=GQA-MAPS

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

// Grouped-query attention: 6 query heads over 2 key/value heads (groups
// of 3), causal, bf16. q, o, dO and lse are viewed as [B, Hkv, G, ...]
// (tensor.expand_shape); k and v are indexed without the group loop
// (d0, d1, then i/j/d: d3..d5), dk and dv reduce over it (iterator 2) and
// come out in k's shape; dq, o and lse are collapsed back to q's heads.
// test/Examples/gradcheck-fused.test checks the numbers.

// GQA-MAPS-DAG: = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d5)>
// GQA-MAPS-DAG: = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d4, d5)>
// CHECK-LABEL: func.func @grouped_query(
// CHECK-SAME: %[[Q:[^:]*]]: tensor<2x6x4x8xbf16>, %[[KV:[^:]*]]: tensor<2x2x4x8xbf16>, %[[DO:[^:]*]]: tensor<2x6x4x8xbf16>)
// CHECK: %[[QG:.*]] = tensor.expand_shape %[[Q]] {{\[}}[0], [1, 2], [3], [4]] output_shape [2, 2, 3, 4, 8] : tensor<2x6x4x8xbf16> into tensor<2x2x3x4x8xbf16>
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%[[QG]], %[[KV]] : tensor<2x2x3x4x8xbf16>, tensor<2x2x4x8xbf16>) outs({{.*}} : tensor<2x2x3x4x4xf32>)
// CHECK: %[[O:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0], [1, 2], [3], [4]] : tensor<2x2x3x4x8xbf16> into tensor<2x6x4x8xbf16>
// CHECK: %[[LSE:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0], [1, 2], [3]] : tensor<2x2x3x4xf32> into tensor<2x6x4xf32>
// CHECK: %[[DK:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction", "reduction", "parallel", "parallel"]} ins(%{{.*}}, %[[QG2:.*]] : tensor<2x2x3x4x4xf32>, tensor<2x2x3x4x8xbf16>) outs({{.*}} : tensor<2x2x4x8xf32>)
// CHECK: %[[DV:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction", "reduction", "parallel", "parallel"]} ins(%{{.*}}, %{{.*}} : tensor<2x2x3x4x4xf32>, tensor<2x2x3x4x8xbf16>) outs({{.*}} : tensor<2x2x4x8xf32>)
// CHECK: %[[DQ:.*]] = tensor.collapse_shape %{{.*}} {{\[}}[0], [1, 2], [3], [4]] : tensor<2x2x3x4x8xbf16> into tensor<2x6x4x8xbf16>
// CHECK: %[[DKN:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%[[DK]] : tensor<2x2x4x8xf32>) outs({{.*}} : tensor<2x2x4x8xbf16>)
// CHECK: %[[DVN:.*]] = linalg.generic {{.*}} ins(%[[DV]] : tensor<2x2x4x8xf32>) outs({{.*}} : tensor<2x2x4x8xbf16>)
// CHECK: return %[[O]], %[[LSE]], %[[DQ]], %[[DKN]], %[[DVN]]
func.func @grouped_query(%q: tensor<2x6x4x8xbf16>, %kv: tensor<2x2x4x8xbf16>, %do: tensor<2x6x4x8xbf16>)
    -> (tensor<2x6x4x8xbf16>, tensor<2x6x4xf32>, tensor<2x6x4x8xbf16>, tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>) {
  %o, %lse = dc.attention %q, %kv, %kv causal scale = 0.5 : tensor<2x6x4x8xbf16>, tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16> -> tensor<2x6x4x8xbf16>, tensor<2x6x4xf32>
  %dq, %dk, %dv = dc.attention_grad %q, %kv, %kv, %o, %lse, %do causal scale = 0.5 : tensor<2x6x4x8xbf16>, tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>, tensor<2x6x4x8xbf16>, tensor<2x6x4xf32>, tensor<2x6x4x8xbf16> -> tensor<2x6x4x8xbf16>, tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>
  return %o, %lse, %dq, %dk, %dv : tensor<2x6x4x8xbf16>, tensor<2x6x4xf32>, tensor<2x6x4x8xbf16>, tensor<2x2x4x8xbf16>, tensor<2x2x4x8xbf16>
}
