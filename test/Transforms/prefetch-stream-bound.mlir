// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target=target=%S/Inputs/toy-slow-collective-target.json --dc-prefetch --dc-attach-target --dc-verify-schedule | FileCheck %s
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target=target=%S/Inputs/toy-slow-collective-target.json --dc-prefetch --dc-report -o /dev/null | FileCheck %s --check-prefix=FUSED
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target=target=%S/Inputs/toy-slow-collective-target.json --dc-prefetch="max-fused-bytes=0" --dc-report -o /dev/null | FileCheck %s --check-prefix=APART

// Eight 16 KiB weights used one per matmul (524 us each) on a target whose
// collectives cost 500 us of latency each (583 us per gather): the one
// collective stream, not compute, bounds the step, and every gather queues
// behind the one before. Fusing the first two saves one latency for every
// transfer queued behind them although the first matmul then waits for
// both; whether a fusion pays there is not local, so dc-prefetch tries it
// on the simulator and keeps it only when the whole step gets shorter.
// CHECK-LABEL: func.func @chain
// CHECK: %[[G:.*]]:2 = dc.gather_start %arg0, %arg1
// CHECK: dc.wait %[[G]]#0
// CHECK-COUNT-6: dc.gather_start %arg{{[2-7]}} :
// FUSED: predicted step             4.858 ms
// APART: predicted step             5.180 ms

func.func @chain(%w0a: tensor<64x64xf32> {dc.param = #dc.param<id = 0>}, %w0b: tensor<64x64xf32> {dc.param = #dc.param<id = 1>}, %w1a: tensor<64x64xf32> {dc.param = #dc.param<id = 2>}, %w1b: tensor<64x64xf32> {dc.param = #dc.param<id = 3>}, %w2a: tensor<64x64xf32> {dc.param = #dc.param<id = 4>}, %w2b: tensor<64x64xf32> {dc.param = #dc.param<id = 5>}, %w3a: tensor<64x64xf32> {dc.param = #dc.param<id = 6>}, %w3b: tensor<64x64xf32> {dc.param = #dc.param<id = 7>}, %x: tensor<64x64xf32>) -> (tensor<64x64xf32> {dc.loss}) {
  %e = tensor.empty() : tensor<64x64xf32>
  %h0 = linalg.matmul ins(%x, %w0a : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %y0 = linalg.matmul ins(%h0, %w0b : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h1 = linalg.matmul ins(%y0, %w1a : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %y1 = linalg.matmul ins(%h1, %w1b : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h2 = linalg.matmul ins(%y1, %w2a : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %y2 = linalg.matmul ins(%h2, %w2b : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h3 = linalg.matmul ins(%y2, %w3a : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %y3 = linalg.matmul ins(%h3, %w3b : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %y3 : tensor<64x64xf32>
}
