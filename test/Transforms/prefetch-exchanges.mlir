// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target=target=%S/Inputs/toy-target.json --dc-prefetch="max-fused-bytes=0" --dc-attach-target --dc-verify-schedule | FileCheck %s

// A gather never overtakes, on the FIFO collective stream, an all-to-all
// (dc-ulysses' exchange) that is waited before the gather is. On the toy
// target w1's gather (6.12 us) queues behind the exchange of h0 (1 KiB,
// about as long) and does not fit behind the 8.2 us matmul after it, so
// the latest-start rule alone would hoist it above the exchange start
// (to overtake it), delaying the exchange that is waited first. It stays
// right behind the exchange start instead.
// CHECK-LABEL: func.func @step
// CHECK: %[[G0:.*]] = dc.gather_start %arg0
// CHECK: linalg.matmul ins(%arg2, %{{.*}} :
// CHECK-NOT: dc.gather_start
// CHECK: %[[F:.*]] = dc.all_to_all_start
// CHECK-NEXT: %[[G1:.*]] = dc.gather_start %arg1
// CHECK-NEXT: linalg.matmul ins(%arg2, %arg2
// CHECK-NEXT: dc.wait %[[F]]
// CHECK: dc.wait %[[G1]]
shard.grid @world(shape = 2)
func.func @step(%w0: tensor<16x16xf32> {dc.param = #dc.param<id = 0>},
                %w1: tensor<16x16xf32> {dc.param = #dc.param<id = 1>},
                %x: tensor<16x16xf32>) -> (tensor<16x16xf32> {dc.loss}) {
  %e = tensor.empty() : tensor<16x16xf32>
  %h0 = linalg.matmul ins(%x, %w0 : tensor<16x16xf32>, tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  %f = dc.all_to_all_start %h0 on @world[0] split 0 concat 1 : tensor<16x16xf32> -> !dc.future<tensor<8x32xf32>>
  %m = linalg.matmul ins(%x, %x : tensor<16x16xf32>, tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  %a = dc.wait %f : !dc.future<tensor<8x32xf32>>
  %flat = tensor.collapse_shape %a [[0, 1]] : tensor<8x32xf32> into tensor<256xf32>
  %a16 = tensor.expand_shape %flat [[0, 1]] output_shape [16, 16] : tensor<256xf32> into tensor<16x16xf32>
  %s = linalg.add ins(%m, %a16 : tensor<16x16xf32>, tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  %h1 = linalg.matmul ins(%s, %w1 : tensor<16x16xf32>, tensor<16x16xf32>) outs(%e : tensor<16x16xf32>) -> tensor<16x16xf32>
  return %h1 : tensor<16x16xf32>
}
