// RUN: dc-opt %s --split-input-file --dc-artifact-manifest --verify-diagnostics
// RUN: not dc-opt %s --split-input-file --dc-artifact-manifest="world-size=4" 2>&1 | FileCheck %s --check-prefix=WORLD

shard.grid @world(shape = 2)
// expected-error @+1 {{a second grid; the dcrt runtime has one communicator, the world, so an artifact has one grid}}
shard.grid @other(shape = 2)

// -----

// expected-error @+1 {{has a dynamic axis; an artifact needs the world size}}
shard.grid @world(shape = ?)

// -----

// expected-error @+1 {{argument #0 has type 'tensor<?xf32>'; an artifact takes statically shaped tensors}}
func.func @step(%x: tensor<?xf32>) -> (tensor<f32> {dc.loss}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{argument #0 has element type 'f64', which the dcrt runtime has no dtype for (f32, bf16, f16, i32, i64)}}
func.func @step(%x: tensor<4xf64>) -> (tensor<f32> {dc.loss}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{result #1 is neither the loss (dc.loss) nor a gradient (dc.grad); the runtime knows no other results}}
func.func @step(%x: tensor<4xf32>) -> (tensor<f32> {dc.loss}, tensor<4xf32>) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %x : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{result #1 is the gradient of parameter id 3, which no argument declares}}
func.func @step(%x: tensor<4xf32>) -> (tensor<f32> {dc.loss}, tensor<4xf32> {dc.grad = #dc.grad<param = 3>}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %x : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{no step: an artifact exports the public functions with a body, and this module has none}}
module {
  func.func private @external(tensor<4xf32>)
}

// -----

module {
  // expected-error @+1 {{@dc_artifact_manifest is exported by the artifact itself}}
  func.func @dc_artifact_manifest() {
    return
  }
}

// -----

// WORLD: error: the module runs on 2 rank(s) but world-size=4 was asked for
shard.grid @world(shape = 2)
func.func @step(%x: tensor<4xf32>) -> (tensor<f32> {dc.loss}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Only parameter shards live in host memory: not data,
shard.grid @world(shape = 2)
func.func @step(%w: !dc.host<!dc.shard<tensor<8xf32>, @world[0], local = 4>> {dc.param = #dc.param<id = 0>},
                // expected-error @+1 {{argument #1 is '!dc.host<!dc.shard<tensor<8xf32>, @world[0], local = 4>>', in host memory; an artifact keeps only parameter shard arguments in host memory (dc-offload-params)}}
                %v: !dc.host<!dc.shard<tensor<8xf32>, @world[0], local = 4>>)
    -> (tensor<f32> {dc.loss}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// not a replicated parameter (dc-offload-params moves only shards),
// expected-error @+1 {{argument #0 is '!dc.host<tensor<8xf32>>', in host memory; an artifact keeps only parameter shard arguments in host memory (dc-offload-params)}}
func.func @step(%w: !dc.host<tensor<8xf32>> {dc.param = #dc.param<id = 0>})
    -> (tensor<f32> {dc.loss}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// and not a result.
shard.grid @world(shape = 2)
// expected-error @+1 {{result #1 is '!dc.host<!dc.shard<tensor<8xf32>, @world[0], local = 4>>', in host memory; an artifact keeps only parameter shard arguments in host memory (dc-offload-params)}}
func.func @step(%w: !dc.host<!dc.shard<tensor<8xf32>, @world[0], local = 4>> {dc.param = #dc.param<id = 0>})
    -> (tensor<f32> {dc.loss}, !dc.host<!dc.shard<tensor<8xf32>, @world[0], local = 4>> {dc.grad = #dc.grad<param = 0>}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %w : tensor<f32>, !dc.host<!dc.shard<tensor<8xf32>, @world[0], local = 4>>
}

// -----

// expected-error @+1 {{argument #0: dc.vocab must be a positive integer on an integer data argument (token ids), got 32 : i64}}
func.func @step(%x: tensor<4xf32> {dc.vocab = 32 : i64}) -> (tensor<f32> {dc.loss}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{argument #0: dc.vocab must be a positive integer on an integer data argument (token ids), got 0 : i64}}
func.func @step(%x: tensor<4xi32> {dc.vocab = 0 : i64}) -> (tensor<f32> {dc.loss}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}
