// RUN: dc-opt %s | dc-opt | FileCheck %s

// The optimizer ops, on shards and on whole tensors, with and without a
// master, and their buffer forms, print and parse back.

shard.grid @world(shape = 2)

// CHECK-LABEL: func.func @sharded
// CHECK: %[[S:.*]] = dc.grad_squares %arg1, %arg5 : !dc.shard<tensor<16x32xbf16>, @world[0], local = 256>, tensor<f64>
// CHECK: dc.adamw %arg0, %arg1, %arg2, %arg3 master %arg4, %arg6, %arg7, %[[S]] {beta1 = 9.000000e-01 : f64, beta2 = {{[0-9.e-]+}} : f64, eps = 1.000000e-08 : f64, max_grad_norm = 1.000000e+00 : f64, weight_decay = 1.000000e-01 : f64}
// CHECK-SAME: master !dc.shard<tensor<16x32xf32>, @world[0], local = 256> -> !dc.shard<tensor<16x32xbf16>, @world[0], local = 256>, !dc.shard<tensor<16x32xbf16>, @world[0], local = 256>, !dc.shard<tensor<16x32xbf16>, @world[0], local = 256> master !dc.shard<tensor<16x32xf32>, @world[0], local = 256>
func.func @sharded(%p: !dc.shard<tensor<16x32xbf16>, @world[0], local = 256>,
                   %g: !dc.shard<tensor<16x32xbf16>, @world[0], local = 256>,
                   %m: !dc.shard<tensor<16x32xbf16>, @world[0], local = 256>,
                   %v: !dc.shard<tensor<16x32xbf16>, @world[0], local = 256>,
                   %w: !dc.shard<tensor<16x32xf32>, @world[0], local = 256>,
                   %s0: tensor<f64>, %lr: tensor<f64>, %step: tensor<i64>) {
  %s = dc.grad_squares %g, %s0 : !dc.shard<tensor<16x32xbf16>, @world[0], local = 256>, tensor<f64>
  %p1, %m1, %v1, %w1 = dc.adamw %p, %g, %m, %v master %w, %lr, %step, %s
      {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64,
       weight_decay = 0.1 : f64, max_grad_norm = 1.0 : f64}
      : !dc.shard<tensor<16x32xbf16>, @world[0], local = 256>,
        !dc.shard<tensor<16x32xbf16>, @world[0], local = 256>,
        !dc.shard<tensor<16x32xbf16>, @world[0], local = 256>,
        !dc.shard<tensor<16x32xbf16>, @world[0], local = 256>,
        tensor<f64>, tensor<i64>, tensor<f64>
        master !dc.shard<tensor<16x32xf32>, @world[0], local = 256>
      -> !dc.shard<tensor<16x32xbf16>, @world[0], local = 256>, !dc.shard<tensor<16x32xbf16>, @world[0], local = 256>, !dc.shard<tensor<16x32xbf16>, @world[0], local = 256> master !dc.shard<tensor<16x32xf32>, @world[0], local = 256>
  return
}

// CHECK-LABEL: func.func @whole
// CHECK: dc.adamw %arg0, %arg1, %arg2, %arg3, %arg4, %arg5, %arg6 {{.*}} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<i64>, tensor<f64> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
func.func @whole(%p: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>,
                 %v: tensor<4xf32>, %lr: tensor<f64>, %step: tensor<i64>,
                 %s: tensor<f64>) {
  %p1, %m1, %v1 = dc.adamw %p, %g, %m, %v, %lr, %step, %s
      {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64,
       weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64}
      : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
        tensor<f64>, tensor<i64>, tensor<f64>
      -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// CHECK-LABEL: func.func @buffers
// CHECK: dc.grad_squares_into %arg1, %arg5 into %arg5 full_numel = 512 shard_axis = 0 : memref<256xbf16>, memref<f64> into memref<f64>
// CHECK: dc.adamw_into %arg0, %arg1, %arg2, %arg3 master %arg4, %arg6, %arg7, %arg5 into %arg0, %arg2, %arg3 master %arg4 full_numel = 512 shard_axis = 0
func.func @buffers(%p: memref<256xbf16>, %g: memref<256xbf16>,
                   %m: memref<256xf32>, %v: memref<256xf32>,
                   %w: memref<256xf32>, %s: memref<f64>, %lr: memref<f64>,
                   %step: memref<i64>) {
  dc.grad_squares_into %g, %s into %s full_numel = 512 shard_axis = 0
      : memref<256xbf16>, memref<f64> into memref<f64>
  dc.adamw_into %p, %g, %m, %v master %w, %lr, %step, %s
      into %p, %m, %v master %w full_numel = 512 shard_axis = 0
      {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64,
       weight_decay = 0.0 : f64, max_grad_norm = 1.0 : f64}
      : memref<256xbf16>, memref<256xbf16>, memref<256xf32>,
        memref<256xf32>, memref<f64>, memref<i64>, memref<f64>
        master memref<256xf32> into memref<256xbf16>, memref<256xf32>,
        memref<256xf32> master memref<256xf32>
  return
}

// Gradient accumulation's sum, the norm share of a block of experts and of
// a mean over micro-batches, and their buffer forms.
shard.grid @grid2(shape = 2x2)

// CHECK-LABEL: func.func @accumulation
// CHECK: %[[A:.*]] = dc.grad_accumulate %arg0, %arg1 : !dc.shard<tensor<2x8xbf16>, @grid2[0], local = 8>, !dc.shard<tensor<2x8xf32>, @grid2[0], local = 8>
// CHECK: dc.grad_squares %[[A]], %arg2 {expert_axis = 1 : i64, micro_batches = 4 : i64}
// CHECK: dc.grad_accumulate_into %arg3, %arg4 into %arg4 full_numel = 16 shard_axis = 0 : memref<8xbf16>, memref<8xf32> into memref<8xf32>
// CHECK: dc.grad_squares_into %arg4, %arg5 into %arg5 full_numel = 16 shard_axis = 0 {expert_axis = 1 : i64, micro_batches = 4 : i64}
func.func @accumulation(%g: !dc.shard<tensor<2x8xbf16>, @grid2[0], local = 8>,
                        %sum: !dc.shard<tensor<2x8xf32>, @grid2[0], local = 8>,
                        %s0: tensor<f64>, %gb: memref<8xbf16>, %sb: memref<8xf32>,
                        %qb: memref<f64>) {
  %a = dc.grad_accumulate %g, %sum : !dc.shard<tensor<2x8xbf16>, @grid2[0], local = 8>, !dc.shard<tensor<2x8xf32>, @grid2[0], local = 8>
  %s = dc.grad_squares %a, %s0 {expert_axis = 1 : i64, micro_batches = 4 : i64} : !dc.shard<tensor<2x8xf32>, @grid2[0], local = 8>, tensor<f64>
  dc.grad_accumulate_into %gb, %sb into %sb full_numel = 16 shard_axis = 0 : memref<8xbf16>, memref<8xf32> into memref<8xf32>
  dc.grad_squares_into %sb, %qb into %qb full_numel = 16 shard_axis = 0 {expert_axis = 1 : i64, micro_batches = 4 : i64} : memref<8xf32>, memref<f64> into memref<f64>
  return
}
