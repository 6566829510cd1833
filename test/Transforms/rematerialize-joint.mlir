// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-slow-link.json memory-budget=100KiB" --dc-rematerialize="min-bytes=1024 leave-to-offload=true" --dc-offload-activations="min-bytes=1024" --dc-attach-target=memory-budget=100KiB --dc-verify-schedule | FileCheck %s --check-prefix=NONE
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-slow-link.json memory-budget=70KiB" --dc-rematerialize="min-bytes=1024 leave-to-offload=true" --dc-offload-activations="min-bytes=1024" --dc-attach-target=memory-budget=70KiB --dc-verify-schedule | FileCheck %s --check-prefix=CHEAP
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-slow-link.json memory-budget=70KiB" --dc-rematerialize="min-bytes=1024 leave-to-offload=true" --dc-offload-activations="min-bytes=1024" --dc-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-slow-link.json memory-budget=70KiB" --dc-offload-activations="min-bytes=1024" --dc-report -o /dev/null | FileCheck %s --check-prefix=ALONE
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-slow-link.json memory-budget=70KiB" --dc-rematerialize="min-bytes=1024 leave-to-offload=true max-recompute-ops=1" --dc-offload-activations="min-bytes=1024" --dc-attach-target=memory-budget=70KiB --dc-verify-schedule | FileCheck %s --check-prefix=EXPENSIVE
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-slow-link.json memory-budget=70KiB" --dc-rematerialize="min-bytes=1024 leave-to-offload=true max-recompute-ops=1" --dc-offload-activations="min-bytes=1024" --dc-report -o /dev/null | FileCheck %s --check-prefix=EXPENSIVE-REPORT

// The host link moves 40 MB/s here. A cheap elementwise chain (n = exp(x),
// s = n * x: 8 us, 16 KiB saved, 2 GB/s) and a matmul output m (524 us to
// recompute, 31 MB/s: slower than the link) are made in forward and read
// again in backward, m after ten matmuls. Just in time the step peaks at
// 80.25 KiB at the first backward op (x, s, m, o and its result live), right
// after the forward: no copy can leave before it without stalling.

// At 100 KiB the step fits: nothing changes.
// NONE-LABEL: func.func @step
// NONE-NOT: dc.recompute
// NONE-NOT: dc.offload_start

// At 70 KiB one tensor must go. Offloading it would stall compute (the
// offload floor is 0.26 ms), recomputing s costs 8 us: s is recomputed, both
// ops of its chain cloned right before its backward use, and nothing is
// offloaded.
// CHEAP-LABEL: func.func @step
// CHEAP-NOT: dc.offload_start
// CHEAP: %[[S:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %arg0 :
// CHEAP: %[[E:.*]] = tensor.empty() {dc.recompute = 0 : i64}
// CHEAP-NEXT: %[[N2:.*]] = linalg.generic {{.*}} ins(%arg0 : {{.*}} outs(%[[E]] : {{.*}} attrs = {dc.recompute = 0 : i64}
// CHEAP: %[[S2:.*]] = linalg.generic {{.*}} ins(%[[N2]], %arg0 : {{.*}} attrs = {dc.recompute = 0 : i64}
// CHEAP: arith.mulf %{{.*}}, %[[S2]]
// CHEAP-NOT: dc.recompute
// CHEAP-NOT: dc.offload_start

// The report: s recomputed (8.2 us added), m kept; the floor offload alone
// would have faced; and the predicted step against offload alone (7.365 ms
// against 7.762 ms).
// REPORT: predicted step             7.365 ms
// REPORT: offload-alone floor        0.258 ms   of copy stall had nothing been recomputed (10.25 KiB (10496 B) over budget at the peak)
// The joint floor: the 10.25 KiB over budget recomputed at s's rate, 8.2 us
// per 16 KiB (a fraction of s: a lower bound), 5.3 us.
// REPORT-NEXT: joint floor                0.005 ms   added by any mix of recomputation and offload, at least (10.25 KiB (10496 B) over budget at the peak)
// REPORT: kept activations       2, 32.00 KiB (32768 B), added      0.000 ms
// REPORT-NEXT: offloaded activations  0, 0 B, added      0.000 ms
// REPORT-NEXT: recomputed activations 1, 16.00 KiB (16384 B), added      0.008 ms
// REPORT: recomputed tensor<64x64xf32>                   16384         8.2         0.0  linalg.generic
// REPORT-NEXT: kept       tensor<64x64xf32>                   16384         0.0         0.0  linalg.matmul
// ALONE: predicted step             7.762 ms
// ALONE: offloaded activations  1, 16.00 KiB (16384 B), added      0.406 ms

// With one op per recomputation s cannot be recomputed, and m, slower to
// recompute than to copy, is left to offload: nothing is recomputed and the
// excess is offloaded.
// EXPENSIVE-LABEL: func.func @step
// EXPENSIVE-NOT: dc.recompute
// EXPENSIVE: dc.offload_start
// EXPENSIVE-NOT: dc.recompute

// Its joint floor lies below both offload alone (0.258 ms of stall) and
// recomputing m alone (10.25/16 of 524 us, 0.336 ms): about 5.8 KiB
// offloaded (a 0.145 ms copy the forward cannot hide) while the rest of m is
// recomputed in as long (0.145 ms), the larger of the two counting; the plan
// (offload, 0.406 ms added) is above it.
// EXPENSIVE-REPORT: joint floor                0.145 ms   added by any mix of recomputation and offload, at least (10.25 KiB (10496 B) over budget at the peak)
// EXPENSIVE-REPORT: offloaded activations  1, 16.00 KiB (16384 B), added      0.406 ms

func.func @step(%x: tensor<64x64xf32>) -> (tensor<64xf32> {dc.loss}, tensor<64xf32>) {
  %e = tensor.empty() : tensor<64x64xf32>
  %r = tensor.empty() : tensor<64xf32>
  // Forward. A cheap elementwise chain: n = exp(x), s = n * x.
  %n = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %v = math.exp %in : f32
      linalg.yield %v : f32
    } -> tensor<64x64xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} ins(%n, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
    ^bb0(%a: f32, %b: f32, %out: f32):
      %v = arith.mulf %a, %b : f32
      linalg.yield %v : f32
    } -> tensor<64x64xf32>
  // An expensive one: a matmul.
  %m = linalg.matmul ins(%s, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %o = linalg.matmul ins(%m, %s : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %loss = linalg.reduce ins(%o : tensor<64x64xf32>) outs(%r : tensor<64xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %v = arith.addf %in, %acc : f32
      linalg.yield %v : f32
    }
  // Backward: reads m (after ten more matmuls), then s.
  %g1 = arith.mulf %o, %x : tensor<64x64xf32>
  %g2 = linalg.matmul ins(%g1, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %b3 = linalg.matmul ins(%g2, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %b4 = linalg.matmul ins(%b3, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %b5 = linalg.matmul ins(%b4, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %b6 = linalg.matmul ins(%b5, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %b7 = linalg.matmul ins(%b6, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %b8 = linalg.matmul ins(%b7, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %b9 = linalg.matmul ins(%b8, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %b10 = linalg.matmul ins(%b9, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %b11 = linalg.matmul ins(%b10, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %b12 = linalg.matmul ins(%b11, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h1 = arith.mulf %b12, %m : tensor<64x64xf32>
  %g3 = linalg.matmul ins(%h1, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h2 = arith.mulf %g3, %s : tensor<64x64xf32>
  %grad = linalg.reduce ins(%h2 : tensor<64x64xf32>) outs(%r : tensor<64xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %v = arith.addf %in, %acc : f32
      linalg.yield %v : f32
    }
  return %loss, %grad : tensor<64xf32>, tensor<64xf32>
}
