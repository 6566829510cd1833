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
                // expected-error @+1 {{argument #1 is '!dc.host<!dc.shard<tensor<8xf32>, @world[0], local = 4>>', in host memory; an artifact keeps only parameter shard arguments (dc-offload-params) and optimizer state arguments (dc-offload-optimizer-state) in host memory}}
                %v: !dc.host<!dc.shard<tensor<8xf32>, @world[0], local = 4>>)
    -> (tensor<f32> {dc.loss}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// not a replicated parameter (dc-offload-params moves only shards),
// expected-error @+1 {{argument #0 is '!dc.host<tensor<8xf32>>', in host memory; an artifact keeps only parameter shard arguments (dc-offload-params) and optimizer state arguments (dc-offload-optimizer-state) in host memory}}
func.func @step(%w: !dc.host<tensor<8xf32>> {dc.param = #dc.param<id = 0>})
    -> (tensor<f32> {dc.loss}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// and not a result.
shard.grid @world(shape = 2)
// expected-error @+1 {{result #1 is '!dc.host<!dc.shard<tensor<8xf32>, @world[0], local = 4>>', in host memory; an artifact keeps only parameter shard arguments (dc-offload-params) and optimizer state arguments (dc-offload-optimizer-state) in host memory}}
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

// -----

// Token ids index an embedding of 13 rows (through a view and a linalg
// body's index_cast): a vocabulary of 20 would read past the table.
#col = affine_map<(d0, d1) -> (d0)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
// expected-error @+1 {{argument #1: dc.vocab = 20 exceeds the 13 entries its ids index: a larger id would read or write outside the table}}
func.func @step(%table: tensor<13x4xf32> {dc.param = #dc.param<id = 0, name = "table">}, %tokens: tensor<2x3xi32> {dc.vocab = 20 : i64}) -> (tensor<6x4xf32> {dc.loss}) {
  %flat = tensor.collapse_shape %tokens [[0, 1]] : tensor<2x3xi32> into tensor<6xi32>
  %init = tensor.empty() : tensor<6x4xf32>
  %rows = linalg.generic {indexing_maps = [#col, #id2], iterator_types = ["parallel", "parallel"]} ins(%flat : tensor<6xi32>) outs(%init : tensor<6x4xf32>) {
  ^bb0(%id: i32, %out: f32):
    %row = arith.index_cast %id : i32 to index
    %col = linalg.index 1 : index
    // expected-note @+1 {{indexed here (an extent of 13)}}
    %v = tensor.extract %table[%row, %col] : tensor<13x4xf32>
    linalg.yield %v : f32
  } -> tensor<6x4xf32>
  return %rows : tensor<6x4xf32>
}

// -----

// Targets with an ignored id replaced by 0 (a loss's ignore_index) index
// the logits' 5 columns; a 3-row slice at a token's row of an 8-row table
// may start at rows 0 to 5: 6 is the bound.
#col = affine_map<(d0) -> (d0)>
#none = affine_map<(d0) -> ()>
// expected-error @+1 {{argument #2: dc.vocab = 6 exceeds the 5 entries its ids index}}
func.func @step(%logits: tensor<4x5xf32> {dc.param = #dc.param<id = 0, name = "logits">}, %table: tensor<8x2xf32> {dc.param = #dc.param<id = 1, name = "table">}, %targets: tensor<4xi32> {dc.vocab = 6 : i64}) -> (tensor<f32> {dc.loss}) {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<f32>
  %acc = linalg.fill ins(%zero : f32) outs(%init : tensor<f32>) -> tensor<f32>
  %sum = linalg.generic {indexing_maps = [#col, #none], iterator_types = ["reduction"]} ins(%targets : tensor<4xi32>) outs(%acc : tensor<f32>) {
  ^bb0(%t: i32, %o: f32):
    %ignore = arith.constant -100 : i32
    %keep = arith.cmpi ne, %t, %ignore : i32
    %c0 = arith.constant 0 : i32
    %safe = arith.select %keep, %t, %c0 : i32
    %i = linalg.index 0 : index
    %col = arith.index_cast %safe : i32 to index
    // expected-note @+1 {{indexed here (an extent of 5)}}
    %v = tensor.extract %logits[%i, %col] : tensor<4x5xf32>
    %s = arith.addf %o, %v : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %c0 = arith.constant 0 : index
  %t0 = tensor.extract %targets[%c0] : tensor<4xi32>
  %r0 = arith.index_cast %t0 : i32 to index
  %rows = tensor.extract_slice %table[%r0, 0] [3, 2] [1, 1] : tensor<8x2xf32> to tensor<3x2xf32>
  return %sum : tensor<f32>
}

// -----

// A gradient with another shape than its parameter's (an edited param id):
// refused when the manifest is written (dc-compile --no-schedule too), not
// first by dc-run.
// expected-error @+1 {{result #1 has type 'tensor<3xf32>', but it is the gradient of parameter id 0, argument #0 of type 'tensor<4xf32>' (a gradient has its parameter's shape and sharding)}}
func.func @step(%w: tensor<4xf32> {dc.param = #dc.param<id = 0>}, %b: tensor<3xf32> {dc.param = #dc.param<id = 1>}) -> (tensor<f32> {dc.loss}, tensor<3xf32> {dc.grad = #dc.grad<param = 0>}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %b : tensor<f32>, tensor<3xf32>
}
