// RUN: dc-opt %s --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map unknown-type-conversion=identity-layout-map" | FileCheck %s

// The optimizer ops bufferize to their buffer forms, which call libdcrt:
// operands read in place (a shard as its flat local buffer), outputs
// freshly allocated, with the parameter's element count and shard axis
// that the flat buffers no longer show.

shard.grid @world(shape = 2)

// CHECK-LABEL: func.func @step
// CHECK-SAME: (%[[P:.*]]: memref<256xbf16>, %[[G:.*]]: memref<256xbf16>, %[[M:.*]]: memref<256xf32>, %[[V:.*]]: memref<256xf32>, %[[W:.*]]: memref<256xf32>, %[[S0:.*]]: memref<f64>, %[[LR:.*]]: memref<f64>, %[[N:.*]]: memref<i64>)
// CHECK: %[[S:.*]] = memref.alloc() {{.*}}: memref<f64>
// CHECK: dc.grad_squares_into %[[G]], %[[S0]] into %[[S]] full_numel = 511 shard_axis = 0
// CHECK: %[[P1:.*]] = memref.alloc() {{.*}}: memref<256xbf16>
// CHECK: %[[M1:.*]] = memref.alloc() {{.*}}: memref<256xf32>
// CHECK: %[[V1:.*]] = memref.alloc() {{.*}}: memref<256xf32>
// CHECK: %[[W1:.*]] = memref.alloc() {{.*}}: memref<256xf32>
// CHECK: dc.adamw_into %[[P]], %[[G]], %[[M]], %[[V]] master %[[W]], %[[LR]], %[[N]], %[[S]] into %[[P1]], %[[M1]], %[[V1]] master %[[W1]] full_numel = 511 shard_axis = 0
// CHECK: return %[[P1]], %[[M1]], %[[V1]], %[[W1]]
func.func @step(%p: !dc.shard<tensor<511xbf16>, @world[0], local = 256>,
                %g: !dc.shard<tensor<511xbf16>, @world[0], local = 256>,
                %m: !dc.shard<tensor<511xf32>, @world[0], local = 256>,
                %v: !dc.shard<tensor<511xf32>, @world[0], local = 256>,
                %w: !dc.shard<tensor<511xf32>, @world[0], local = 256>,
                %s0: tensor<f64>, %lr: tensor<f64>, %step: tensor<i64>)
    -> (!dc.shard<tensor<511xbf16>, @world[0], local = 256>,
        !dc.shard<tensor<511xf32>, @world[0], local = 256>,
        !dc.shard<tensor<511xf32>, @world[0], local = 256>,
        !dc.shard<tensor<511xf32>, @world[0], local = 256>) {
  %s = dc.grad_squares %g, %s0 : !dc.shard<tensor<511xbf16>, @world[0], local = 256>, tensor<f64>
  %p1, %m1, %v1, %w1 = dc.adamw %p, %g, %m, %v master %w, %lr, %step, %s
      {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64,
       weight_decay = 0.0 : f64, max_grad_norm = 1.0 : f64}
      : !dc.shard<tensor<511xbf16>, @world[0], local = 256>,
        !dc.shard<tensor<511xbf16>, @world[0], local = 256>,
        !dc.shard<tensor<511xf32>, @world[0], local = 256>,
        !dc.shard<tensor<511xf32>, @world[0], local = 256>,
        tensor<f64>, tensor<i64>, tensor<f64>
        master !dc.shard<tensor<511xf32>, @world[0], local = 256>
      -> !dc.shard<tensor<511xbf16>, @world[0], local = 256>,
         !dc.shard<tensor<511xf32>, @world[0], local = 256>,
         !dc.shard<tensor<511xf32>, @world[0], local = 256>
         master !dc.shard<tensor<511xf32>, @world[0], local = 256>
  return %p1, %m1, %v1, %w1 : !dc.shard<tensor<511xbf16>, @world[0], local = 256>, !dc.shard<tensor<511xf32>, @world[0], local = 256>, !dc.shard<tensor<511xf32>, @world[0], local = 256>, !dc.shard<tensor<511xf32>, @world[0], local = 256>
}
