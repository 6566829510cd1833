// Steps dc-optimizer-in-step=micro-batches=4 refuses, each a located error
// (optimizer-in-step-invalid.mlir runs it).

shard.grid @world(shape = 2)

// expected-error @+1 {{dc-optimizer-in-step: micro-batches=4, but @planned_for_two was planned for 2 (dc-accumulate-gradients)}}
func.func @planned_for_two(%w: !dc.shard<tensor<8xf32>, @world[0], local = 4> {dc.param = #dc.param<id = 0>},
                           %g: !dc.shard<tensor<8xf32>, @world[0], local = 4>)
    -> (tensor<f32> {dc.loss}, !dc.shard<tensor<8xf32>, @world[0], local = 4> {dc.grad = #dc.grad<param = 0>})
    attributes {dc.micro_batches = 2 : i64} {
  %c = arith.constant dense<1.0> : tensor<f32>
  return %c, %g : tensor<f32>, !dc.shard<tensor<8xf32>, @world[0], local = 4>
}

// -----

shard.grid @world(shape = 2)

// expected-error @+1 {{dc-optimizer-in-step: @lost's accumulating form @lost_accumulate is not in the module}}
func.func @lost(%w: !dc.shard<tensor<8xf32>, @world[0], local = 4> {dc.param = #dc.param<id = 0>},
                %g: !dc.shard<tensor<8xf32>, @world[0], local = 4>)
    -> (tensor<f32> {dc.loss}, !dc.shard<tensor<8xf32>, @world[0], local = 4> {dc.grad = #dc.grad<param = 0>})
    attributes {dc.accumulating_step = @lost_accumulate} {
  %c = arith.constant dense<1.0> : tensor<f32>
  return %c, %g : tensor<f32>, !dc.shard<tensor<8xf32>, @world[0], local = 4>
}

// -----

shard.grid @world(shape = 2)

// expected-error @+1 {{dc-optimizer-in-step: @taken_accumulate exists already; it would be the accumulating form of @taken}}
func.func @taken(%w: !dc.shard<tensor<8xf32>, @world[0], local = 4> {dc.param = #dc.param<id = 0>},
                 %g: !dc.shard<tensor<8xf32>, @world[0], local = 4>)
    -> (tensor<f32> {dc.loss}, !dc.shard<tensor<8xf32>, @world[0], local = 4> {dc.grad = #dc.grad<param = 0>}) {
  %c = arith.constant dense<1.0> : tensor<f32>
  return %c, %g : tensor<f32>, !dc.shard<tensor<8xf32>, @world[0], local = 4>
}
func.func private @taken_accumulate()

// -----

shard.grid @world(shape = 2)

// expected-error @+1 {{dc-optimizer-in-step: @differ and its accumulating form @differ_acc do not return the same gradients}}
func.func @differ(%w: !dc.shard<tensor<8xf32>, @world[0], local = 4> {dc.param = #dc.param<id = 0>},
                  %v: !dc.shard<tensor<8xf32>, @world[0], local = 4> {dc.param = #dc.param<id = 1>},
                  %g: !dc.shard<tensor<8xf32>, @world[0], local = 4>)
    -> (tensor<f32> {dc.loss}, !dc.shard<tensor<8xf32>, @world[0], local = 4> {dc.grad = #dc.grad<param = 0>},
        !dc.shard<tensor<8xf32>, @world[0], local = 4> {dc.grad = #dc.grad<param = 1>})
    attributes {dc.accumulating_step = @differ_acc} {
  %c = arith.constant dense<1.0> : tensor<f32>
  return %c, %g, %g : tensor<f32>, !dc.shard<tensor<8xf32>, @world[0], local = 4>, !dc.shard<tensor<8xf32>, @world[0], local = 4>
}
func.func @differ_acc(%w: !dc.shard<tensor<8xf32>, @world[0], local = 4> {dc.param = #dc.param<id = 0>},
                      %v: !dc.shard<tensor<8xf32>, @world[0], local = 4> {dc.param = #dc.param<id = 1>},
                      %g: !dc.shard<tensor<8xf32>, @world[0], local = 4>)
    -> (tensor<f32> {dc.loss}, !dc.shard<tensor<8xf32>, @world[0], local = 4> {dc.grad = #dc.grad<param = 0>})
    attributes {dc.accumulates_for = @differ} {
  %c = arith.constant dense<1.0> : tensor<f32>
  return %c, %g : tensor<f32>, !dc.shard<tensor<8xf32>, @world[0], local = 4>
}
