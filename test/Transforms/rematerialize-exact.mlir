// RUN: not dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=70KiB" --dc-rematerialize="min-bytes=1024" 2>&1 | FileCheck %s
// The same step with the calls replaced by linalg.copy (deterministic) fits.
// RUN: sed -e 's/func.call @draw(%%\([xd]\)) : (tensor<64x64xf32>)/linalg.copy ins(%%\1 : tensor<64x64xf32>) outs(%%e : tensor<64x64xf32>)/' %s | dc-opt --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=70KiB" --dc-rematerialize="min-bytes=1024" | FileCheck %s --check-prefix=COPY
// COPY: linalg.copy {dc.recompute = 0 : i64}

// Only ops that compute the same bits again are cloned. d and c come from
// calls (which could draw random numbers: a dropout mask, say), so they are
// never recomputed, and nothing else idle across the peak (the backward
// matmul, with x, d, c, a and its result live: 80.25 KiB) can go.
// CHECK: error: device memory peaks here at 80.25 KiB (82176 B) with every activation idle across it that can be recomputed exactly (within max-recompute-ops) already recomputed; the budget of 70.00 KiB (71680 B) is short by 10.25 KiB (10496 B)

func.func private @draw(tensor<64x64xf32>) -> tensor<64x64xf32>

func.func @step(%x: tensor<64x64xf32>) -> (tensor<64xf32> {dc.loss}, tensor<64xf32>) {
  %e = tensor.empty() : tensor<64x64xf32>
  %r = tensor.empty() : tensor<64xf32>
  %d = func.call @draw(%x) : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %c = func.call @draw(%d) : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %a = linalg.matmul ins(%c, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %loss = linalg.reduce ins(%a : tensor<64x64xf32>) outs(%r : tensor<64xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %v = arith.addf %in, %acc : f32
      linalg.yield %v : f32
    }
  %g = linalg.matmul ins(%a, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h = arith.mulf %g, %c : tensor<64x64xf32>
  %h2 = arith.mulf %h, %d : tensor<64x64xf32>
  %grad = linalg.reduce ins(%h2 : tensor<64x64xf32>) outs(%r : tensor<64xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %v = arith.addf %in, %acc : f32
      linalg.yield %v : f32
    }
  return %loss, %grad : tensor<64xf32>, tensor<64xf32>
}
