// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=35KiB" --dc-rematerialize="min-bytes=1024" --dc-attach-target=memory-budget=35KiB --dc-verify-schedule | FileCheck %s

// y = x w is made in forward (w gathered, then released) and read again in
// backward by g2, while the backward's own gathered copy of w is live. The
// step peaks at 36.75 KiB at the 16 KiB temporary; at 35 KiB y (and g1's
// fill) are recomputed. The clone of y's matmul reads the backward's copy
// of w: no second gather of w inside that copy's interval (which costs a
// gather, holds w twice, and made dc-selective-gather's merge invalid
// before it learnt to fold nested copies).

// CHECK-LABEL: func.func @step
// CHECK: dc.release
// CHECK: %[[GB:.*]] = dc.gather_start %arg0 :
// CHECK-NEXT: %[[WB:.*]] = dc.wait %[[GB]]
// CHECK-NOT: dc.gather_start
// CHECK: %[[Y:.*]] = linalg.matmul {dc.recompute = {{[0-9]+}} : i64} ins(%arg1, %[[WB]] :
// CHECK-NEXT: linalg.matmul ins(%[[Y]], %[[WB]] :
// CHECK-NEXT: dc.release %[[WB]]
// CHECK-NOT: dc.release
// CHECK: return
#id = affine_map<(i, j) -> (i, j)>
#col = affine_map<(i, j) -> (j)>
shard.grid @world(shape = 2)
func.func @step(%w: !dc.shard<tensor<16x16xf32>, @world[0], local = 128> {dc.param = #dc.param<id = 0, name = "w">},
                %x: tensor<16x16xf32>, %dy: tensor<16x16xf32>, %z: tensor<64x64xf32>)
    -> (tensor<16x16xf32> {dc.loss}, tensor<16x16xf32>, tensor<64xf32>) {
  %e = tensor.empty() : tensor<16x16xf32>
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  // Forward: y = x w, read again in backward.
  %gf = dc.gather_start %w : !dc.shard<tensor<16x16xf32>, @world[0], local = 128> -> !dc.future<tensor<16x16xf32>>
  %wf = dc.wait %gf : !dc.future<tensor<16x16xf32>>
  %y = linalg.matmul ins(%x, %wf : tensor<16x16xf32>, tensor<16x16xf32>) outs(%f : tensor<16x16xf32>) -> tensor<16x16xf32>
  dc.release %wf : tensor<16x16xf32>
  // The peak: a 16 KiB temporary between forward and backward.
  %t = arith.mulf %z, %z : tensor<64x64xf32>
  %e1 = tensor.empty() : tensor<64xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<64xf32>) -> tensor<64xf32>
  %rt = linalg.generic {indexing_maps = [#id, #col], iterator_types = ["reduction", "parallel"]} ins(%t : tensor<64x64xf32>) outs(%f1 : tensor<64xf32>) {
    ^bb0(%in: f32, %acc: f32):
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    } -> tensor<64xf32>
  // Backward: w gathered again for g1, still live at g2, y's first use.
  %gb = dc.gather_start %w : !dc.shard<tensor<16x16xf32>, @world[0], local = 128> -> !dc.future<tensor<16x16xf32>>
  %wb = dc.wait %gb : !dc.future<tensor<16x16xf32>>
  %g1 = linalg.matmul ins(%dy, %wb : tensor<16x16xf32>, tensor<16x16xf32>) outs(%f : tensor<16x16xf32>) -> tensor<16x16xf32>
  %g2 = linalg.matmul ins(%y, %wb : tensor<16x16xf32>, tensor<16x16xf32>) outs(%g1 : tensor<16x16xf32>) -> tensor<16x16xf32>
  dc.release %wb : tensor<16x16xf32>
  return %g2, %g1, %rt : tensor<16x16xf32>, tensor<16x16xf32>, tensor<64xf32>
}
