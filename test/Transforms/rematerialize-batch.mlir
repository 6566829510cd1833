// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=100KiB" --dc-rematerialize="min-bytes=1024" --dc-attach-target=memory-budget=100KiB --dc-verify-schedule | FileCheck %s

// One round of dc-rematerialize takes, best first, the candidates of one
// peak until they free half its excess, and checks them all on the next
// timeline; if the peak did not fall by all their bytes, it keeps only the
// best and checks it alone (and rejects it if it did not lower the peak).
//
// Four 16 KiB activations made in forward (exp, log, sqrt, tanh of x) are
// read again after the peak (a 64 KiB temporary), and w is a view of the
// exp's result, read after the peak too. Just in time the step peaks at
// 145.75 KiB; at 100 KiB three of them must go. A view is no candidate of
// its own (it frees nothing while its buffer has other uses): the exp's
// buffer is recomputed whole, its clone read directly and through a clone
// of w. The exp, log and sqrt are recomputed, best first, and the step
// fits; the tanh is kept.

// CHECK-LABEL: func.func @step
// CHECK-NOT: dc.recompute
// CHECK: tensor.empty() {dc.recompute = [[EXP:[0-9]+]] : i64}
// CHECK-NEXT: %[[V1:.*]] = linalg.generic {{.*}}dc.recompute = [[EXP]] : i64
// CHECK-NEXT: ^bb0
// CHECK-NEXT: math.exp
// CHECK: %[[W:.*]] = tensor.expand_shape %[[V1]] {{.*}}{dc.recompute = [[EXP]] : i64}
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[V1]] :
// CHECK: linalg.generic {{.*}} ins(%[[W]] :
// CHECK-NOT: dc.recompute
// CHECK: tensor.empty() {dc.recompute = [[LOG:[0-9]+]] : i64}
// CHECK-NEXT: linalg.generic {{.*}}dc.recompute = [[LOG]] : i64
// CHECK-NEXT: ^bb0
// CHECK-NEXT: math.log
// CHECK-NOT: dc.recompute
// CHECK: tensor.empty() {dc.recompute = [[SQRT:[0-9]+]] : i64}
// CHECK-NEXT: linalg.generic {{.*}}dc.recompute = [[SQRT]] : i64
// CHECK-NEXT: ^bb0
// CHECK-NEXT: math.sqrt
// CHECK-NOT: dc.recompute
// CHECK: return

#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
#id3 = affine_map<(i, j, k) -> (i, j, k)>
#row3 = affine_map<(i, j, k) -> (i)>
func.func @step(%x: tensor<64x64xf32>) -> (tensor<64xf32> {dc.loss}, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>) {
  %e = tensor.empty() : tensor<64x64xf32>
  %zero = arith.constant 0.0 : f32
  %r0 = tensor.empty() : tensor<64xf32>
  %r = linalg.fill ins(%zero : f32) outs(%r0 : tensor<64xf32>) -> tensor<64xf32>
  // Forward: v1, its view w, v2, v3 (16 KiB each).
  %v1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = math.exp %in : f32
      linalg.yield %v : f32
    } -> tensor<64x64xf32>
  %w = tensor.expand_shape %v1 [[0], [1, 2]] output_shape [64, 64, 1] : tensor<64x64xf32> into tensor<64x64x1xf32>
  %v2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = math.log %in : f32
      linalg.yield %v : f32
    } -> tensor<64x64xf32>
  %v3 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = math.sqrt %in : f32
      linalg.yield %v : f32
    } -> tensor<64x64xf32>
  %v4 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = math.tanh %in : f32
      linalg.yield %v : f32
    } -> tensor<64x64xf32>
  // The peak: a 64 KiB temporary (made from x, read once).
  %e4 = tensor.empty() : tensor<256x64xf32>
  %big = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i mod 64, j)>, #id], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<64x64xf32>) outs(%e4 : tensor<256x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    } -> tensor<256x64xf32>
  %sbig = linalg.generic {indexing_maps = [#id, affine_map<(i, j) -> (j)>], iterator_types = ["reduction", "parallel"]} ins(%big : tensor<256x64xf32>) outs(%r : tensor<64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = arith.addf %in, %out : f32
      linalg.yield %v : f32
    } -> tensor<64xf32>
  // Backward: each read again.
  %s1 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%v1 : tensor<64x64xf32>) outs(%r : tensor<64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = arith.addf %in, %out : f32
      linalg.yield %v : f32
    } -> tensor<64xf32>
  %sw = linalg.generic {indexing_maps = [#id3, #row3], iterator_types = ["parallel", "reduction", "reduction"]} ins(%w : tensor<64x64x1xf32>) outs(%r : tensor<64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = arith.addf %in, %out : f32
      linalg.yield %v : f32
    } -> tensor<64xf32>
  %s2 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%v2 : tensor<64x64xf32>) outs(%r : tensor<64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = arith.addf %in, %out : f32
      linalg.yield %v : f32
    } -> tensor<64xf32>
  %s3 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%v3 : tensor<64x64xf32>) outs(%r : tensor<64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = arith.addf %in, %out : f32
      linalg.yield %v : f32
    } -> tensor<64xf32>
  %s4 = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%v4 : tensor<64x64xf32>) outs(%r : tensor<64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = arith.addf %in, %out : f32
      linalg.yield %v : f32
    } -> tensor<64xf32>
  return %sbig, %s1, %sw, %s2, %s3, %s4 : tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<64xf32>
}
