// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target=target=%S/Inputs/toy-target.json --dc-optimizer-in-step --dc-offload-optimizer-state="state=all" | FileCheck %s
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target=target=%S/Inputs/toy-target.json --dc-optimizer-in-step --dc-offload-optimizer-state="state=budget" | FileCheck %s --check-prefix=FITS
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=520B" --dc-optimizer-in-step --dc-offload-optimizer-state="state=budget" | FileCheck %s --check-prefix=BUDGET
// RUN: not dc-opt %s --dc-zero3="world-size=2" --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=64B" --dc-optimizer-in-step --dc-offload-optimizer-state="state=budget" 2>&1 | FileCheck %s --check-prefix=SHORT
// RUN: dc-opt %s --dc-zero3="world-size=2" --dc-attach-target=target=%S/Inputs/toy-target.json --dc-optimizer-in-step --dc-offload-optimizer-state="state=all" --dc-report -o /dev/null | FileCheck %s --check-prefix=REPORT

// Every parameter's moments in host memory: the arguments become !dc.host,
// the first parameter's are uploaded when the optimizer phase begins (the
// norm's first share), the next one's right after the first update; each
// update reads the uploaded copies and is written back into the caller's
// buffers right after it, waited before the next offloaded update (the
// last before the return). The state is no result any more.
// CHECK-LABEL: func.func @step
// CHECK-SAME: %arg5: !dc.host<!dc.shard<tensor<8x4xf32>, @world[0], local = 16>> {dc.name = "w.exp_avg", dc.optimizer_state = {param = 0 : i64, state = "exp_avg"}}
// CHECK-SAME: %arg6: !dc.host<!dc.shard<tensor<8x4xf32>, @world[0], local = 16>> {dc.name = "w.exp_avg_sq"
// CHECK-SAME: -> (tensor<f32> {dc.loss}, !dc.shard<tensor<8x4xf32>, @world[0], local = 16> {dc.param_update = 0 : i64}, !dc.shard<tensor<4xf32>, @world[0], local = 2> {dc.param_update = 1 : i64}, tensor<f64> {dc.grad_squares})
// CHECK-SAME: dc.state_in_host = array<i64: 0, 1>
// CHECK: %[[UM:.*]] = dc.reload_start %arg5
// CHECK-NEXT: %[[UV:.*]] = dc.reload_start %arg6
// CHECK-NEXT: dc.grad_squares
// CHECK: %[[M:.*]] = dc.wait %[[UM]]
// CHECK-NEXT: %[[V:.*]] = dc.wait %[[UV]]
// CHECK-NEXT: %[[W:.*]], %[[WM:.*]], %[[WV:.*]] = dc.adamw %arg0, %{{.*}}, %[[M]], %[[V]],
// CHECK-NEXT: dc.reload_start %arg7
// CHECK-NEXT: dc.reload_start %arg8
// CHECK-NEXT: %[[DM:.*]] = dc.offload_start %[[WM]] into %arg5 : !dc.shard<tensor<8x4xf32>, @world[0], local = 16> into !dc.host<!dc.shard<tensor<8x4xf32>, @world[0], local = 16>>
// CHECK-NEXT: %[[DV:.*]] = dc.offload_start %[[WV]] into %arg6
// CHECK-NEXT: dc.wait %[[DM]]
// CHECK-NEXT: dc.wait %[[DV]]
// CHECK-NEXT: dc.wait
// CHECK-NEXT: dc.wait
// CHECK-NEXT: dc.adamw %arg1
// CHECK-NEXT: dc.offload_start %{{.*}} into %arg7
// CHECK-NEXT: dc.offload_start %{{.*}} into %arg8
// CHECK-NEXT: dc.wait
// CHECK-NEXT: dc.wait
// CHECK-NEXT: return

// With the whole budget there is room: nothing moves.
// FITS-LABEL: func.func @step
// FITS-NOT: !dc.host
// FITS-NOT: dc.state_in_host
// FITS-NOT: dc.reload_start

// A budget the step fits only without the largest state (w's moments):
// those go to host memory, b's stay.
// BUDGET-LABEL: func.func @step
// BUDGET-SAME: %arg5: !dc.host<!dc.shard<tensor<8x4xf32>
// BUDGET-SAME: %arg7: !dc.shard<tensor<4xf32>, @world[0], local = 2> {dc.name = "b.exp_avg"
// BUDGET-SAME: dc.state_in_host = array<i64: 0>

// SHORT: error: dc-offload-optimizer-state: with every parameter's optimizer state in host memory, device memory still peaks here at

// REPORT: optimizer (in step)   {{ *[0-9.]+}} ms   AdamW of 2 parameters and the norm, state 144 B (in the step's memory; 144 B of it in host memory, copies {{ *[0-9.]+}} ms (waited {{ *[0-9.]+}} ms))

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

