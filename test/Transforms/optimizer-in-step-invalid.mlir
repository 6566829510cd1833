// RUN: dc-opt %s --split-input-file --dc-optimizer-in-step -verify-diagnostics
// RUN: dc-opt %S/Inputs/optimizer-accumulation-invalid.mlir --split-input-file --dc-optimizer-in-step=micro-batches=4 -verify-diagnostics
// RUN: not dc-opt %s --split-input-file --dc-optimizer-in-step=micro-batches=0 2>&1 | FileCheck %s --check-prefix=ZERO

// ZERO: error: dc-optimizer-in-step: micro-batches must be at least 1, got 0

// What dc-optimizer-in-step does not update (yet), each a located error.

shard.grid @world(shape = 2)

// expected-error @+1 {{dc-optimizer-in-step: @accumulating is compiled for gradient accumulation (dc-accumulate-gradients); give dc-optimizer-in-step the same micro-batches}}
func.func @accumulating(%w: !dc.shard<tensor<8xf32>, @world[0], local = 4> {dc.param = #dc.param<id = 0>},
                        %g: !dc.shard<tensor<8xf32>, @world[0], local = 4>)
    -> (tensor<f32> {dc.loss}, !dc.shard<tensor<8xf32>, @world[0], local = 4> {dc.grad = #dc.grad<param = 0>})
    attributes {dc.accumulating_step = @accumulating_accumulate} {
  %c = arith.constant dense<1.0> : tensor<f32>
  return %c, %g : tensor<f32>, !dc.shard<tensor<8xf32>, @world[0], local = 4>
}

// -----

shard.grid @world(shape = 2)

func.func @host(
    // expected-error @+1 {{dc-optimizer-in-step: parameter 'w' is kept in host memory (dc-offload-params); its update inside the step is not supported yet}}
    %w: !dc.host<!dc.shard<tensor<8xf32>, @world[0], local = 4>> {dc.param = #dc.param<id = 0, name = "w">},
    %g: !dc.shard<tensor<8xf32>, @world[0], local = 4>)
    -> (tensor<f32> {dc.loss}, !dc.shard<tensor<8xf32>, @world[0], local = 4> {dc.grad = #dc.grad<param = 0>}) {
  %c = arith.constant dense<1.0> : tensor<f32>
  return %c, %g : tensor<f32>, !dc.shard<tensor<8xf32>, @world[0], local = 4>
}

// -----

func.func @integer(
    // expected-error @+1 {{dc-optimizer-in-step: parameter 'n' must be f32, bf16 or f16 to be updated by AdamW}}
    %n: tensor<8xf64> {dc.param = #dc.param<id = 0, name = "n">},
    %g: tensor<8xf64>)
    -> (tensor<f32> {dc.loss}, tensor<8xf64> {dc.grad = #dc.grad<param = 0>}) {
  %c = arith.constant dense<1.0> : tensor<f32>
  return %c, %g : tensor<f32>, tensor<8xf64>
}

// -----

func.func @grad_of_another_shape(
    // expected-error @+1 {{dc-optimizer-in-step: parameter 'w' has a gradient of another shape or sharding ('tensor<4xf32>')}}
    %w: tensor<8xf32> {dc.param = #dc.param<id = 0, name = "w">},
    %g: tensor<4xf32>)
    -> (tensor<f32> {dc.loss}, tensor<4xf32> {dc.grad = #dc.grad<param = 0>}) {
  %c = arith.constant dense<1.0> : tensor<f32>
  return %c, %g : tensor<f32>, tensor<4xf32>
}
