// RUN: dc-opt %s --split-input-file --dc-write-outputs-in-place | FileCheck %s

// dq, dk, dv of a bshd backward, copied into the column slices of the
// fused gradient (allocated after the op): the op writes the slices, the
// allocation moves before it, the copies and the fresh buffers go.
// CHECK-LABEL: func.func @into_fused_gradient
// CHECK: %[[G:.*]] = memref.alloc() : memref<16x48xbf16>
// CHECK: %[[S0:.*]] = memref.subview %[[G]][0, 0] [16, 16] [1, 1]
// CHECK: %[[DQ:.*]] = memref.expand_shape %[[S0]] {{\[}}[0, 1], [2, 3]] output_shape [2, 8, 2, 8] : memref<16x16xbf16, strided<[48, 1]>> into memref<2x8x2x8xbf16, strided<[384, 48, 8, 1]>>
// CHECK: %[[S1:.*]] = memref.subview %[[G]][0, 16] [16, 16] [1, 1]
// CHECK: %[[DK:.*]] = memref.expand_shape %[[S1]]
// CHECK: %[[S2:.*]] = memref.subview %[[G]][0, 32] [16, 16] [1, 1]
// CHECK: %[[DV:.*]] = memref.expand_shape %[[S2]]
// CHECK: dc.attention_grad_into {{.*}} into %[[DQ]], %[[DK]], %[[DV]] causal bshd
// CHECK-NOT: memref.copy
// CHECK: return %[[G]]
!bshd = memref<2x8x2x8xbf16>
func.func @into_fused_gradient(%q: !bshd, %o: !bshd, %lse: memref<2x2x8xf32>) -> memref<16x48xbf16> {
  %dq = memref.alloc() : !bshd
  %dk = memref.alloc() : !bshd
  %dv = memref.alloc() : !bshd
  dc.attention_grad_into %q, %q, %q, %o, %lse, %o into %dq, %dk, %dv causal bshd scale = 0.5
      : !bshd, !bshd, !bshd, !bshd, memref<2x2x8xf32>, !bshd into !bshd, !bshd, !bshd
  %g = memref.alloc() : memref<16x48xbf16>
  %cq = memref.collapse_shape %dq [[0, 1], [2, 3]] : !bshd into memref<16x16xbf16>
  %sq = memref.subview %g[0, 0] [16, 16] [1, 1] : memref<16x48xbf16> to memref<16x16xbf16, strided<[48, 1]>>
  memref.copy %cq, %sq : memref<16x16xbf16> to memref<16x16xbf16, strided<[48, 1]>>
  %ck = memref.collapse_shape %dk [[0, 1], [2, 3]] : !bshd into memref<16x16xbf16>
  %sk = memref.subview %g[0, 16] [16, 16] [1, 1] : memref<16x48xbf16> to memref<16x16xbf16, strided<[48, 1], offset: 16>>
  memref.copy %ck, %sk : memref<16x16xbf16> to memref<16x16xbf16, strided<[48, 1], offset: 16>>
  %cv = memref.collapse_shape %dv [[0, 1], [2, 3]] : !bshd into memref<16x16xbf16>
  %sv = memref.subview %g[0, 32] [16, 16] [1, 1] : memref<16x48xbf16> to memref<16x16xbf16, strided<[48, 1], offset: 32>>
  memref.copy %cv, %sv : memref<16x16xbf16> to memref<16x16xbf16, strided<[48, 1], offset: 32>>
  return %g : memref<16x48xbf16>
}

// -----

// Left alone: the gradient buffer is read between the op and dv's copy
// (dv's slice would be written too early), dk's copy overlaps dq's slice,
// and dq is also read elsewhere.
// CHECK-LABEL: func.func @not_safe
// CHECK: dc.attention_grad_into {{.*}} into %{{.*}}, %{{.*}}, %{{.*}} causal bshd scale = 5.000000e-01 : {{.*}} into memref<2x8x2x8xbf16>, memref<2x8x2x8xbf16>, memref<2x8x2x8xbf16>
// CHECK-COUNT-6: memref.copy
!bshd = memref<2x8x2x8xbf16>
func.func @not_safe(%q: !bshd, %o: !bshd, %lse: memref<2x2x8xf32>, %sink: memref<16x48xbf16>) -> memref<16x48xbf16> {
  %dq = memref.alloc() : !bshd
  %dk = memref.alloc() : !bshd
  %dv = memref.alloc() : !bshd
  %g = memref.alloc() : memref<16x48xbf16>
  dc.attention_grad_into %q, %q, %q, %o, %lse, %o into %dq, %dk, %dv causal bshd scale = 0.5
      : !bshd, !bshd, !bshd, !bshd, memref<2x2x8xf32>, !bshd into !bshd, !bshd, !bshd
  %cq = memref.collapse_shape %dq [[0, 1], [2, 3]] : !bshd into memref<16x16xbf16>
  %sq = memref.subview %g[0, 0] [16, 16] [1, 1] : memref<16x48xbf16> to memref<16x16xbf16, strided<[48, 1]>>
  memref.copy %cq, %sq : memref<16x16xbf16> to memref<16x16xbf16, strided<[48, 1]>>
  memref.copy %o, %o : !bshd to !bshd
  memref.copy %dq, %o : !bshd to !bshd
  %ck = memref.collapse_shape %dk [[0, 1], [2, 3]] : !bshd into memref<16x16xbf16>
  %sk = memref.subview %g[0, 8] [16, 16] [1, 1] : memref<16x48xbf16> to memref<16x16xbf16, strided<[48, 1], offset: 8>>
  memref.copy %ck, %sk : memref<16x16xbf16> to memref<16x16xbf16, strided<[48, 1], offset: 8>>
  memref.copy %g, %sink : memref<16x48xbf16> to memref<16x48xbf16>
  %cv = memref.collapse_shape %dv [[0, 1], [2, 3]] : !bshd into memref<16x16xbf16>
  %sv = memref.subview %g[0, 32] [16, 16] [1, 1] : memref<16x48xbf16> to memref<16x16xbf16, strided<[48, 1], offset: 32>>
  memref.copy %cv, %sv : memref<16x16xbf16> to memref<16x16xbf16, strided<[48, 1], offset: 32>>
  return %g : memref<16x48xbf16>
}

// -----

// A rotary embedding's backward (an all-parallel generic that only writes
// its output), copied through a collapse_shape into a column slice of the
// fused gradient: the generic writes the slice. Between it and the copy, a
// generic that writes another buffer and a copy into a disjoint slice.
// CHECK-LABEL: func.func @elementwise_into_fused_gradient
// CHECK: %[[G:.*]] = memref.alloc() : memref<16x48xbf16>
// CHECK: %[[S:.*]] = memref.subview %[[G]][0, 16] [16, 16] [1, 1]
// CHECK: %[[V:.*]] = memref.expand_shape %[[S]] {{\[}}[0, 1], [2, 3]] output_shape [2, 8, 2, 8] : memref<16x16xbf16, strided<[48, 1], offset: 16>> into memref<2x8x2x8xbf16, strided<[384, 48, 8, 1], offset: 16>>
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : memref<2x8x2x8xbf16>) outs(%[[V]] : memref<2x8x2x8xbf16, strided<[384, 48, 8, 1], offset: 16>>)
// CHECK: linalg.generic
// CHECK: memref.copy
// CHECK-NOT: memref.copy
// CHECK: return %[[G]]
#map4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
!bshd = memref<2x8x2x8xbf16>
func.func @elementwise_into_fused_gradient(%dq: !bshd, %dv: memref<16x16xbf16>, %other: !bshd) -> memref<16x48xbf16> {
  %g = memref.alloc() : memref<16x48xbf16>
  %dk = memref.alloc() : !bshd
  linalg.generic {indexing_maps = [#map4, #map4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%dq : !bshd) outs(%dk : !bshd) {
  ^bb0(%in: bf16, %out: bf16):
    %n = arith.negf %in : bf16
    linalg.yield %n : bf16
  }
  linalg.generic {indexing_maps = [#map4, #map4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%dq : !bshd) outs(%other : !bshd) {
  ^bb0(%in: bf16, %out: bf16):
    linalg.yield %in : bf16
  }
  %sv = memref.subview %g[0, 32] [16, 16] [1, 1] : memref<16x48xbf16> to memref<16x16xbf16, strided<[48, 1], offset: 32>>
  memref.copy %dv, %sv : memref<16x16xbf16> to memref<16x16xbf16, strided<[48, 1], offset: 32>>
  %ck = memref.collapse_shape %dk [[0, 1], [2, 3]] : !bshd into memref<16x16xbf16>
  %sk = memref.subview %g[0, 16] [16, 16] [1, 1] : memref<16x48xbf16> to memref<16x16xbf16, strided<[48, 1], offset: 16>>
  memref.copy %ck, %sk : memref<16x16xbf16> to memref<16x16xbf16, strided<[48, 1], offset: 16>>
  return %g : memref<16x48xbf16>
}

// -----

// Left alone: the generic reads what it writes (an accumulation), and a
// generic between reads the destination through its body.
// CHECK-LABEL: func.func @elementwise_not_safe
// CHECK-COUNT-2: memref.copy
!bshd = memref<2x8x2x8xbf16>
#map4 = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @elementwise_not_safe(%dq: !bshd, %i: index) -> memref<16x48xbf16> {
  %g = memref.alloc() : memref<16x48xbf16>
  %acc = memref.alloc() : !bshd
  linalg.generic {indexing_maps = [#map4, #map4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%dq : !bshd) outs(%acc : !bshd) {
  ^bb0(%in: bf16, %out: bf16):
    %s = arith.addf %in, %out : bf16
    linalg.yield %s : bf16
  }
  %ca = memref.collapse_shape %acc [[0, 1], [2, 3]] : !bshd into memref<16x16xbf16>
  %sa = memref.subview %g[0, 0] [16, 16] [1, 1] : memref<16x48xbf16> to memref<16x16xbf16, strided<[48, 1]>>
  memref.copy %ca, %sa : memref<16x16xbf16> to memref<16x16xbf16, strided<[48, 1]>>
  %dk = memref.alloc() : !bshd
  linalg.generic {indexing_maps = [#map4, #map4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%dq : !bshd) outs(%dk : !bshd) {
  ^bb0(%in: bf16, %out: bf16):
    %n = arith.negf %in : bf16
    linalg.yield %n : bf16
  }
  %sink = memref.alloc() : !bshd
  linalg.generic {indexing_maps = [#map4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%sink : !bshd) {
  ^bb0(%out: bf16):
    %x = memref.load %g[%i, %i] : memref<16x48xbf16>
    linalg.yield %x : bf16
  }
  %ck = memref.collapse_shape %dk [[0, 1], [2, 3]] : !bshd into memref<16x16xbf16>
  %sk = memref.subview %g[0, 16] [16, 16] [1, 1] : memref<16x48xbf16> to memref<16x16xbf16, strided<[48, 1], offset: 16>>
  memref.copy %ck, %sk : memref<16x16xbf16> to memref<16x16xbf16, strided<[48, 1], offset: 16>>
  return %g : memref<16x48xbf16>
}
