// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=36608" --dc-selective-gather --dc-attach-target=memory-budget=36608 --dc-verify-schedule | FileCheck %s --check-prefix=KEEP
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=36607" --dc-selective-gather --dc-attach-target=memory-budget=36607 --dc-verify-schedule | FileCheck %s --check-prefix=FOLD

// A parameter gathered again inside the interval of another gathered copy
// of it, as dc-rematerialize does when a recomputed forward op needs a
// weight the backward has already gathered: the backward's copy %wb lives
// from its wait to the release after the last backward matmul, and the
// recomputation's copy %wr is gathered and released in between. Merging
// neighbouring intervals (drop the earlier one's release, the later copy
// reads the earlier) released %wb at %wr's release, before %wb's last use:
// an invalid schedule that dc-verify-schedule rejected. The nested copy is
// folded into %wb instead (its gather, wait and release go), whatever the
// budget: it only frees memory.
//
// The step peaks at 34.75 KiB (35584 B) at the reduction of the 16 KiB
// temporary between forward and backward; keeping the forward copy (1 KiB)
// across it needs 36608 B. With that budget one gather and one release of %arg0 remain
// (KEEP); one byte less, the forward copy is released and the backward
// gathers again, but once (FOLD).

// KEEP-LABEL: func.func @nested
// KEEP: %[[F:.*]] = dc.gather_start %arg0
// KEEP-NEXT: %[[W:.*]] = dc.wait %[[F]]
// KEEP-NEXT: %[[Y:.*]] = linalg.matmul ins(%arg1, %[[W]]
// KEEP-NOT: dc.gather_start
// KEEP-NOT: dc.release
// KEEP: %[[A:.*]] = linalg.matmul ins(%[[Y]], %[[W]]
// KEEP-NEXT: %[[R:.*]] = linalg.matmul {dc.recompute = 0 : i64} ins(%arg1, %[[W]]
// KEEP-NEXT: linalg.matmul ins(%[[R]], %[[W]]
// KEEP-NEXT: dc.release %[[W]]
// KEEP-NOT: dc.release
// KEEP: return

// FOLD-LABEL: func.func @nested
// FOLD: %[[F:.*]] = dc.gather_start %arg0
// FOLD-NEXT: %[[W:.*]] = dc.wait %[[F]]
// FOLD-NEXT: %[[Y:.*]] = linalg.matmul ins(%arg1, %[[W]]
// FOLD-NEXT: dc.release %[[W]]
// FOLD: %[[B:.*]] = dc.gather_start %arg0
// FOLD-NEXT: %[[WB:.*]] = dc.wait %[[B]]
// FOLD-NOT: dc.gather_start
// FOLD-NOT: dc.release
// FOLD: linalg.matmul ins(%[[Y]], %[[WB]]
// FOLD-NEXT: %[[R:.*]] = linalg.matmul {dc.recompute = 0 : i64} ins(%arg1, %[[WB]]
// FOLD-NEXT: linalg.matmul ins(%[[R]], %[[WB]]
// FOLD-NEXT: dc.release %[[WB]]
// FOLD-NOT: dc.release
// FOLD: return
shard.grid @world(shape = 2)
func.func @nested(%w: !dc.shard<tensor<16x16xf32>, @world[0], local = 128> {dc.param = #dc.param<id = 0, name = "w">},
                  %x: tensor<16x16xf32>, %z: tensor<64x64xf32>)
    -> (tensor<16x16xf32> {dc.loss}, tensor<16x16xf32>, tensor<16x16xf32>, tensor<64xf32>) {
  %e = tensor.empty() : tensor<16x16xf32>
  %f = dc.gather_start %w : !dc.shard<tensor<16x16xf32>, @world[0], local = 128> -> !dc.future<tensor<16x16xf32>>
  %wf = dc.wait %f : !dc.future<tensor<16x16xf32>>
  %y = linalg.matmul ins(%x, %wf : tensor<16x16xf32>, tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  dc.release %wf : tensor<16x16xf32>
  // Between the forward and the backward: a 16 KiB temporary.
  %t = arith.mulf %z, %z : tensor<64x64xf32>
  %e1 = tensor.empty() : tensor<64xf32>
  %rt = linalg.reduce ins(%t : tensor<64x64xf32>) outs(%e1 : tensor<64xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %sum = arith.addf %in, %acc : f32
      linalg.yield %sum : f32
    }
  // Backward: its own gather of w ...
  %b = dc.gather_start %w : !dc.shard<tensor<16x16xf32>, @world[0], local = 128> -> !dc.future<tensor<16x16xf32>>
  %wb = dc.wait %b : !dc.future<tensor<16x16xf32>>
  %a = linalg.matmul ins(%y, %wb : tensor<16x16xf32>, tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  // ... and inside its interval a recomputation's gather of w.
  %r = dc.gather_start %w {dc.recompute = 0 : i64} : !dc.shard<tensor<16x16xf32>, @world[0], local = 128> -> !dc.future<tensor<16x16xf32>>
  %wr = dc.wait %r : !dc.future<tensor<16x16xf32>>
  %y2 = linalg.matmul {dc.recompute = 0 : i64} ins(%x, %wr : tensor<16x16xf32>, tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  dc.release %wr : tensor<16x16xf32>
  %c = linalg.matmul ins(%y2, %wb : tensor<16x16xf32>, tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  dc.release %wb : tensor<16x16xf32>
  return %y, %a, %c, %rt : tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<64xf32>
}
