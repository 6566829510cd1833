// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-accumulate-gradients="micro-batches=4 local=b" --dc-optimizer-in-step="micro-batches=4 max-grad-norm=1.0" | FileCheck %s
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-optimizer-in-step="micro-batches=4" | FileCheck %s --check-prefix=MADE

// Gradient accumulation with the optimizer inside the step, after
// dc-accumulate-gradients summed `b` before its reduction (local=b): `w`,
// still reduced in every micro-batch, gets an fp32 accumulator of its
// shard in both forms. The accumulating form adds the reduced shard into
// it and returns it (into the accumulator's buffer); the final form does
// the same and updates from the sum. Both gradients' norm shares and
// updates are of the mean over the 4 micro-batches.
// CHECK-LABEL: func.func @step(
// CHECK-SAME: %arg3: tensor<4xf32> {dc.accumulator = 1 : i64, dc.name = "b.grad_accum"}
// CHECK-SAME: %arg4: !dc.shard<tensor<8x4xf32>, @world[0], local = 16> {dc.accumulator = 0 : i64, dc.name = "w.grad_accum"}
// CHECK-SAME: %arg5: tensor<f64> {dc.learning_rate
// CHECK-SAME: -> (tensor<f32> {dc.loss}, !dc.shard<tensor<8x4xf32>, @world[0], local = 16> {dc.accumulator = 0 : i64}, !dc.shard<tensor<8x4xf32>, @world[0], local = 16> {dc.param_update = 0 : i64}
// CHECK-SAME: dc.accumulating_step = @step_accumulate
// CHECK-SAME: dc.micro_batches = 4 : i64
// CHECK-SAME: dc.optimizer = {{{.*}}micro_batches = 4 : i64
// CHECK: %[[G:.*]]:2 = dc.end_backward
// CHECK-NEXT: %[[W:.*]] = dc.grad_accumulate %[[G]]#0, %arg4 : !dc.shard<tensor<8x4xf32>, @world[0], local = 16>, !dc.shard<tensor<8x4xf32>, @world[0], local = 16>
// CHECK: %[[S0:.*]] = dc.grad_squares %[[W]], %{{.*}} {micro_batches = 4 : i64}
// CHECK-NEXT: %[[S1:.*]] = dc.grad_squares %[[G]]#1, %[[S0]] {micro_batches = 4 : i64}
// CHECK: %[[SQ:.*]] = dc.wait
// CHECK-NEXT: dc.adamw %arg0, %[[W]], {{.*}} micro_batches = 4 : i64
// CHECK-NEXT: dc.adamw %arg1, %[[G]]#1, {{.*}} micro_batches = 4 : i64
// CHECK-NEXT: return %{{.*}}, %[[W]],
// CHECK-LABEL: func.func @step_accumulate(
// CHECK-SAME: %arg3: tensor<4xf32> {dc.accumulator = 1 : i64, dc.name = "b.grad_accum"}, %arg4: !dc.shard<tensor<8x4xf32>, @world[0], local = 16> {dc.accumulator = 0 : i64, dc.name = "w.grad_accum"})
// CHECK-SAME: -> (tensor<f32> {dc.loss}, tensor<4xf32> {dc.accumulator = 1 : i64}, !dc.shard<tensor<8x4xf32>, @world[0], local = 16> {dc.accumulator = 0 : i64})
// CHECK-SAME: attributes {dc.accumulates_for = @step, dc.micro_batches = 4 : i64}
// CHECK: %[[R:.*]] = dc.end_backward
// CHECK-NEXT: %[[A:.*]] = dc.grad_accumulate %[[R]], %arg4
// CHECK-NOT: dc.adamw
// CHECK-NOT: dc.grad_squares
// CHECK: return %{{.*}}, %{{.*}}, %[[A]]

// Without dc-accumulate-gradients' forms the pass makes the accumulating
// form itself: every gradient summed over the micro-batches after its
// reduction.
// MADE-LABEL: func.func @step(
// MADE-SAME: %arg3: !dc.shard<tensor<8x4xf32>, @world[0], local = 16> {dc.accumulator = 0 : i64, dc.name = "w.grad_accum"}
// MADE-SAME: %arg4: !dc.shard<tensor<4xf32>, @world[0], local = 2> {dc.accumulator = 1 : i64, dc.name = "b.grad_accum"}
// MADE-SAME: dc.accumulating_step = @step_accumulate
// MADE-COUNT-2: dc.grad_accumulate
// MADE-COUNT-2: dc.adamw
// MADE-LABEL: func.func @step_accumulate(
// MADE-SAME: %arg3: !dc.shard<tensor<8x4xf32>, @world[0], local = 16> {dc.accumulator = 0 : i64, dc.name = "w.grad_accum"}, %arg4: !dc.shard<tensor<4xf32>, @world[0], local = 2> {dc.accumulator = 1 : i64, dc.name = "b.grad_accum"})
// MADE-SAME: -> (tensor<f32> {dc.loss}, !dc.shard<tensor<8x4xf32>, @world[0], local = 16> {dc.accumulator = 0 : i64}, !dc.shard<tensor<4xf32>, @world[0], local = 2> {dc.accumulator = 1 : i64})
// MADE-SAME: attributes {dc.accumulates_for = @step, dc.micro_batches = 4 : i64}
// MADE-COUNT-2: dc.grad_accumulate
// MADE-NOT: dc.adamw

func.func @step(%w: tensor<8x4xf32> {dc.param = #dc.param<id = 0, name = "w">},
                %b: tensor<4xf32> {dc.param = #dc.param<id = 1, name = "b">},
                %x: tensor<2x8xf32> {dc.name = "x"})
    -> (tensor<f32> {dc.loss},
        tensor<8x4xf32> {dc.grad = #dc.grad<param = 0>},
        tensor<4xf32> {dc.grad = #dc.grad<param = 1>}) {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<2x4xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%init : tensor<2x4xf32>) -> tensor<2x4xf32>
  %y = linalg.matmul ins(%x, %w : tensor<2x8xf32>, tensor<8x4xf32>) outs(%fill : tensor<2x4xf32>) -> tensor<2x4xf32>
  %l0 = tensor.empty() : tensor<f32>
  %l1 = linalg.fill ins(%zero : f32) outs(%l0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%y : tensor<2x4xf32>) outs(%l1 : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %gw0 = tensor.empty() : tensor<8x4xf32>
  %gw = linalg.fill ins(%zero : f32) outs(%gw0 : tensor<8x4xf32>) -> tensor<8x4xf32>
  %gb0 = tensor.empty() : tensor<4xf32>
  %gb = linalg.add ins(%b, %b : tensor<4xf32>, tensor<4xf32>) outs(%gb0 : tensor<4xf32>) -> tensor<4xf32>
  return %loss, %gw, %gb : tensor<f32>, tensor<8x4xf32>, tensor<4xf32>
}

