// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-optimizer-in-step="max-grad-norm=1.0 weight-decay=0.1" | FileCheck %s
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-optimizer-in-step="moment-dtype=bf16" | FileCheck %s --check-prefix=BF16
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-optimizer-in-step="master-dtype=f16" 2>&1 | FileCheck %s --check-prefix=BADDTYPE
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target=target=%S/Inputs/toy-target.json --dc-optimizer-in-step --dc-report -o /dev/null | FileCheck %s --check-prefix=REPORT

// dc-report: the update is part of the step (its time in the simulation,
// its state in the step's memory), no trainer state beside it.
// REPORT: optimizer (in step)   {{ *[0-9.]+}} ms   AdamW of 2 parameters and the norm, state 144 B (in the step's memory)
// REPORT-NOT: optimizer step
// REPORT: peak device memory
// REPORT-NOT: optimizer state

// A sharded weight and a bias: each gradient's share of the squared norm
// is added in parameter (argument) order, the sum all-reduced over the
// grid, and each parameter updated by dc.adamw reading its moments (new
// arguments), the learning rate and step (scalar arguments) and the norm.
// The gradients are no longer results: the updates and the state are,
// then the squared norm.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %arg0: !dc.shard<tensor<8x4xf32>, @world[0], local = 16> {dc.param = #dc.param<id = 0, name = "w">}
// CHECK-SAME: %arg3: tensor<f64> {dc.learning_rate, dc.name = "learning_rate"}
// CHECK-SAME: %arg4: tensor<i64> {dc.name = "step_count", dc.step_count}
// CHECK-SAME: %arg5: !dc.shard<tensor<8x4xf32>, @world[0], local = 16> {dc.name = "w.exp_avg", dc.optimizer_state = {param = 0 : i64, state = "exp_avg"}}
// CHECK-SAME: %arg6: !dc.shard<tensor<8x4xf32>, @world[0], local = 16> {dc.name = "w.exp_avg_sq", dc.optimizer_state = {param = 0 : i64, state = "exp_avg_sq"}}
// CHECK-SAME: -> (tensor<f32> {dc.loss}, !dc.shard<tensor<8x4xf32>, @world[0], local = 16> {dc.param_update = 0 : i64}, {{.*}} {dc.optimizer_state = {param = 0 : i64, state = "exp_avg"}}
// CHECK-SAME: tensor<f64> {dc.grad_squares})
// CHECK-SAME: attributes {dc.optimizer = {beta1 = 9.000000e-01 : f64, beta2 = {{[0-9.e-]+}} : f64, eps = 1.000000e-08 : f64, master_dtype = "f32", max_grad_norm = 1.000000e+00 : f64, micro_batches = 1 : i64, moment_dtype = "f32", name = "adamw", weight_decay = 1.000000e-01 : f64}}
// CHECK: %[[G:.*]]:2 = dc.end_backward
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<f64>
// CHECK-NEXT: %[[S0:.*]] = dc.grad_squares %[[G]]#0, %[[ZERO]]
// CHECK-NEXT: %[[S1:.*]] = dc.grad_squares %[[G]]#1, %[[S0]]
// CHECK-NEXT: %[[F:.*]] = dc.all_reduce_start sum %[[S1]] on @world[0] : tensor<f64>
// CHECK-NEXT: %[[SQ:.*]] = dc.wait %[[F]] : !dc.future<tensor<f64>>
// CHECK-NEXT: %[[W:.*]], %[[WM:.*]], %[[WV:.*]] = dc.adamw %arg0, %[[G]]#0, %arg5, %arg6, %arg3, %arg4, %[[SQ]] {beta1 = 9.000000e-01 : f64, beta2 = {{[0-9.e-]+}} : f64, eps = 1.000000e-08 : f64, max_grad_norm = 1.000000e+00 : f64, weight_decay = 1.000000e-01 : f64}
// CHECK-NEXT: %[[B:.*]], %[[BM:.*]], %[[BV:.*]] = dc.adamw %arg1, %[[G]]#1, %arg7, %arg8, %arg3, %arg4, %[[SQ]]
// CHECK-NEXT: return %{{.*}}, %[[W]], %[[WM]], %[[WV]], %[[B]], %[[BM]], %[[BV]], %[[SQ]]

// With bf16 moments, the state arguments are bf16 shards.
// BF16-LABEL: func.func @step
// BF16-SAME: %arg5: !dc.shard<tensor<8x4xbf16>, @world[0], local = 16> {dc.name = "w.exp_avg"
// BF16: dc.adamw {{.*}} : !dc.shard<tensor<8x4xf32>, @world[0], local = 16>, !dc.shard<tensor<8x4xf32>, @world[0], local = 16>, !dc.shard<tensor<8x4xbf16>, @world[0], local = 16>

// BADDTYPE: error: dc-optimizer-in-step: master-dtype must be f32 or bf16, got 'f16'
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

