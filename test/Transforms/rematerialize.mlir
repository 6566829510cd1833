// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=100KiB" --dc-rematerialize="min-bytes=1024 leave-to-offload=true" --dc-offload-activations="min-bytes=1024" --dc-attach-target=memory-budget=100KiB --dc-verify-schedule | FileCheck %s --check-prefix=NONE
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=85KiB" --dc-rematerialize="min-bytes=1024 leave-to-offload=true" --dc-offload-activations="min-bytes=1024" --dc-attach-target=memory-budget=85KiB --dc-verify-schedule | FileCheck %s --check-prefix=FREE
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=70KiB" --dc-rematerialize="min-bytes=1024 leave-to-offload=true" --dc-offload-activations="min-bytes=1024" --dc-attach-target=memory-budget=70KiB --dc-verify-schedule | FileCheck %s --check-prefix=FREE
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=70KiB" --dc-rematerialize="min-bytes=1024" --dc-attach-target=memory-budget=70KiB --dc-verify-schedule | FileCheck %s --check-prefix=ONLY
// RUN: not dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=70KiB" --dc-rematerialize="min-bytes=1024 max-recompute-ops=1" 2>&1 | FileCheck %s --check-prefix=SHORT
// RUN: not dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=63.5KiB" --dc-rematerialize="min-bytes=1024" 2>&1 | FileCheck %s --check-prefix=FLOOR
// RUN: not dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=70KiB" --dc-rematerialize="max-recompute-ops=0" 2>&1 | FileCheck %s --check-prefix=OPTION

// A cheap elementwise chain (n = exp(x), s = n * x: 8 us on the toy target,
// 16 KiB saved, 2 GB/s) and an expensive matmul output m (524 us, 31 MB/s)
// are both made in forward and read again in backward; the host link moves
// 1 GB/s. (rematerialize-joint.mlir has a slower link, where recomputing
// pays beside offload.) Just in time the step peaks at 96.25 KiB at the first backward
// matmul, with x, s, m, o, o2 and its result live.

// At 100 KiB the step fits: nothing is recomputed or offloaded.
// NONE-LABEL: func.func @step
// NONE-NOT: dc.recompute
// NONE-NOT: dc.offload_start

// With offload on (leave-to-offload), at 85 KiB and at 70 KiB the host link
// (1 GB/s) can move what is over budget while compute runs (the offload
// floor is 0): nothing is recomputed, offload takes it.
// FREE-LABEL: func.func @step
// FREE-NOT: dc.recompute
// FREE: dc.offload_start
// FREE-NOT: dc.recompute

// Without offload the pass recomputes matmuls too: o from the live m (id
// 1), then m itself (id 2, cloning n, s and m, as s is dropped too). With m
// recomputed, o need not be: the pass gives o's recomputation back, a
// matmul less (3.70 ms predicted instead of 4.23).
// ONLY-LABEL: func.func @step
// ONLY-NOT: dc.offload_start
// ONLY-NOT: dc.recompute = 1
// ONLY: linalg.matmul {dc.recompute = 2 : i64}
// ONLY-NOT: dc.recompute = 1
// ONLY: dc.recompute = 0
// ONLY-NOT: dc.recompute = 1

// With one op per recomputation, s (two ops) cannot be recomputed, nor m
// (which needs s): o alone is not enough.
// SHORT: error: device memory peaks here at 80.25 KiB (82176 B) with every activation idle across it that can be recomputed exactly (within max-recompute-ops) already recomputed; the budget of 70.00 KiB (71680 B) is short by 10.25 KiB (10496 B)

// FLOOR: error: memory budget 63.50 KiB (65024 B) is below this step's floor of 64.00 KiB (65536 B)

// OPTION: error: dc-rematerialize: option max-recompute-ops=0 must be at least 1

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
  %o = linalg.matmul ins(%m, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %o2 = linalg.matmul ins(%o, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %loss = linalg.reduce ins(%o2 : tensor<64x64xf32>) outs(%r : tensor<64xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %v = arith.addf %in, %acc : f32
      linalg.yield %v : f32
    }
  // Backward: reads m, then s.
  %g1 = linalg.matmul ins(%o2, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %g2 = linalg.matmul ins(%g1, %o : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h1 = arith.mulf %g2, %m : tensor<64x64xf32>
  %g3 = linalg.matmul ins(%h1, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h2 = arith.mulf %g3, %s : tensor<64x64xf32>
  %grad = linalg.reduce ins(%h2 : tensor<64x64xf32>) outs(%r : tensor<64xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %v = arith.addf %in, %acc : f32
      linalg.yield %v : f32
    }
  return %loss, %grad : tensor<64xf32>, tensor<64xf32>
}
