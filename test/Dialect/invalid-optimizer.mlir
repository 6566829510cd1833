// RUN: dc-opt %s -split-input-file -verify-diagnostics

// Verifiers of the optimizer ops, one rejected op per case.

func.func @squares_of_integers(%g: tensor<4xi32>, %s: tensor<f64>) {
  // expected-error @+1 {{'dc.grad_squares' op grad must have element type f32, bf16 or f16, got 'i32'}}
  %r = dc.grad_squares %g, %s : tensor<4xi32>, tensor<f64>
  return
}

// -----

func.func @grad_of_another_shape(%p: tensor<4xf32>, %g: tensor<5xf32>, %m: tensor<4xf32>, %lr: tensor<f64>, %n: tensor<i64>, %s: tensor<f64>) {
  // expected-error @+1 {{'dc.adamw' op grad must have the parameter's shape and sharding 'tensor<4xf32>', got 'tensor<5xf32>'}}
  %a, %b, %c = dc.adamw %p, %g, %m, %m, %lr, %n, %s {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<4xf32>, tensor<5xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<i64>, tensor<f64> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

shard.grid @world(shape = 2)

func.func @moment_sharded_otherwise(%p: !dc.shard<tensor<8xf32>, @world[0], local = 4>, %m: tensor<8xf32>, %lr: tensor<f64>, %n: tensor<i64>, %s: tensor<f64>) {
  // expected-error @+1 {{'dc.adamw' op exp_avg must have the parameter's shape and sharding}}
  %a, %b, %c = dc.adamw %p, %p, %m, %m, %lr, %n, %s {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : !dc.shard<tensor<8xf32>, @world[0], local = 4>, !dc.shard<tensor<8xf32>, @world[0], local = 4>, tensor<8xf32>, tensor<8xf32>, tensor<f64>, tensor<i64>, tensor<f64> -> !dc.shard<tensor<8xf32>, @world[0], local = 4>, tensor<8xf32>, tensor<8xf32>
  return
}

// -----

func.func @f16_moments(%p: tensor<4xf32>, %m: tensor<4xf16>, %lr: tensor<f64>, %n: tensor<i64>, %s: tensor<f64>) {
  // expected-error @+1 {{'dc.adamw' op both moments must be f32 or both bf16, got 'f16' and 'f16'}}
  %a, %b, %c = dc.adamw %p, %p, %m, %m, %lr, %n, %s {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<4xf16>, tensor<4xf16>, tensor<f64>, tensor<i64>, tensor<f64> -> tensor<4xf32>, tensor<4xf16>, tensor<4xf16>
  return
}

// -----

func.func @f16_without_master(%p: tensor<4xf16>, %m: tensor<4xf32>, %lr: tensor<f64>, %n: tensor<i64>, %s: tensor<f64>) {
  // expected-error @+1 {{'dc.adamw' op a 'f16' parameter needs an f32 master copy}}
  %a, %b, %c = dc.adamw %p, %p, %m, %m, %lr, %n, %s {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<4xf16>, tensor<4xf16>, tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<i64>, tensor<f64> -> tensor<4xf16>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @bf16_master(%p: tensor<4xbf16>, %m: tensor<4xf32>, %lr: tensor<f64>, %n: tensor<i64>, %s: tensor<f64>) {
  // expected-error @+1 {{'dc.adamw' op a master copy must be f32, got 'bf16'}}
  %a, %b, %c, %d = dc.adamw %p, %p, %m, %m master %p, %lr, %n, %s {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<4xbf16>, tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<i64>, tensor<f64> master tensor<4xbf16> -> tensor<4xbf16>, tensor<4xf32>, tensor<4xf32> master tensor<4xbf16>
  return
}

// -----

func.func @result_of_another_type(%p: tensor<4xf32>, %lr: tensor<f64>, %n: tensor<i64>, %s: tensor<f64>) {
  // expected-error @+1 {{'dc.adamw' op results must be the parameter, the moments and the master (where there is one), of their operands' types}}
  %a, %b, %c = dc.adamw %p, %p, %p, %p, %lr, %n, %s {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<i64>, tensor<f64> -> tensor<4xbf16>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @beta_of_one(%p: tensor<4xf32>, %lr: tensor<f64>, %n: tensor<i64>, %s: tensor<f64>) {
  // expected-error @+1 {{'dc.adamw' op betas must lie in [0, 1), got (1.000000e+00, 9.990000e-01)}}
  %a, %b, %c = dc.adamw %p, %p, %p, %p, %lr, %n, %s {beta1 = 1.0 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<i64>, tensor<f64> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @negative_clip(%p: tensor<4xf32>, %lr: tensor<f64>, %n: tensor<i64>, %s: tensor<f64>) {
  // expected-error @+1 {{'dc.adamw' op max_grad_norm must be finite and >= 0 (0: no clipping), got -1.000000e+00}}
  %a, %b, %c = dc.adamw %p, %p, %p, %p, %lr, %n, %s {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = -1.0 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<i64>, tensor<f64> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @negative_eps(%p: tensor<4xf32>, %lr: tensor<f64>, %n: tensor<i64>, %s: tensor<f64>) {
  // expected-error @+1 {{'dc.adamw' op eps must be finite and >= 0, got -1.000000e+00}}
  %a, %b, %c = dc.adamw %p, %p, %p, %p, %lr, %n, %s {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = -1.0 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<i64>, tensor<f64> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @squares_into_vector(%g: memref<4xf32>, %s: memref<1xf64>) {
  // expected-error @+1 {{'dc.grad_squares_into' op squares must be 'memref<f64>', got 'memref<1xf64>'}}
  dc.grad_squares_into %g, %s into %s full_numel = 4 shard_axis = -2 : memref<4xf32>, memref<1xf64> into memref<1xf64>
  return
}

// -----

func.func @squares_into_bad_slot(%g: memref<4xf32>, %s: memref<f64>) {
  // expected-error @+1 {{'dc.grad_squares_into' op buffers of 4 elements cannot be this rank's part of 8 elements (shard_axis -2)}}
  dc.grad_squares_into %g, %s into %s full_numel = 8 shard_axis = -2 : memref<4xf32>, memref<f64> into memref<f64>
  return
}

// -----

func.func @squares_into_bad_axis(%g: memref<4xf32>, %s: memref<f64>) {
  // expected-error @+1 {{'dc.grad_squares_into' op shard_axis must be an axis, -1 (every axis) or -2 (not sharded), got -3}}
  dc.grad_squares_into %g, %s into %s full_numel = 8 shard_axis = -3 : memref<4xf32>, memref<f64> into memref<f64>
  return
}

// -----

func.func @adamw_into_short_output(%p: memref<4xf32>, %o: memref<3xf32>, %lr: memref<f64>, %n: memref<i64>, %s: memref<f64>) {
  // expected-error @+1 {{'dc.adamw_into' op every buffer must have the parameter's 4 elements, got 'memref<3xf32>'}}
  dc.adamw_into %p, %p, %p, %p, %lr, %n, %s into %o, %p, %p full_numel = 8 shard_axis = 0 {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<f64>, memref<i64>, memref<f64> into memref<3xf32>, memref<4xf32>, memref<4xf32>
  return
}

// -----

func.func @adamw_into_master_without_output(%p: memref<4xbf16>, %m: memref<4xf32>, %lr: memref<f64>, %n: memref<i64>, %s: memref<f64>) {
  // expected-error @+1 {{'dc.adamw_into' op a master buffer needs an output buffer, and only then}}
  dc.adamw_into %p, %p, %m, %m master %m, %lr, %n, %s into %p, %m, %m full_numel = 8 shard_axis = 0 {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : memref<4xbf16>, memref<4xbf16>, memref<4xf32>, memref<4xf32>, memref<f64>, memref<i64>, memref<f64> master memref<4xf32> into memref<4xbf16>, memref<4xf32>, memref<4xf32>
  return
}

// -----

func.func @adamw_into_output_type(%p: memref<4xf32>, %o: memref<4xbf16>, %lr: memref<f64>, %n: memref<i64>, %s: memref<f64>) {
  // expected-error @+1 {{'dc.adamw_into' op each output buffer must have its input's element type}}
  dc.adamw_into %p, %p, %p, %p, %lr, %n, %s into %o, %p, %p full_numel = 8 shard_axis = 0 {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<f64>, memref<i64>, memref<f64> into memref<4xbf16>, memref<4xf32>, memref<4xf32>
  return
}

// -----

func.func @adamw_into_step_f64(%p: memref<4xf32>, %lr: memref<f64>, %s: memref<f64>) {
  // expected-error @+1 {{'dc.adamw_into' op step must be 'memref<i64>', got 'memref<f64>'}}
  dc.adamw_into %p, %p, %p, %p, %lr, %lr, %s into %p, %p, %p full_numel = 8 shard_axis = 0 {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64} : memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<4xf32>, memref<f64>, memref<f64>, memref<f64> into memref<4xf32>, memref<4xf32>, memref<4xf32>
  return
}

// -----

shard.grid @world(shape = 2x2)

func.func @expert_axis_split(%g: !dc.shard<tensor<8xf32>, @world[0], local = 4>, %s: tensor<f64>) {
  // expected-error @+1 {{'dc.grad_squares' op expert_axis 0 is an axis the gradient is split over; the ranks along the expert axis hold different experts, not parts of one}}
  %r = dc.grad_squares %g, %s {expert_axis = 0 : i64} : !dc.shard<tensor<8xf32>, @world[0], local = 4>, tensor<f64>
  return
}

// -----

func.func @expert_axis_negative(%g: tensor<8xf32>, %s: tensor<f64>) {
  // expected-error @+1 {{'dc.grad_squares' op expert_axis must be a grid axis (>= 0), got -1}}
  %r = dc.grad_squares %g, %s {expert_axis = -1 : i64} : tensor<8xf32>, tensor<f64>
  return
}

// -----

func.func @no_micro_batches(%g: tensor<8xf32>, %s: tensor<f64>) {
  // expected-error @+1 {{'dc.grad_squares' op micro_batches must be at least 1, got 0}}
  %r = dc.grad_squares %g, %s {micro_batches = 0 : i64} : tensor<8xf32>, tensor<f64>
  return
}

// -----

func.func @adamw_no_micro_batches(%p: tensor<4xf32>, %lr: tensor<f64>, %n: tensor<i64>, %s: tensor<f64>) {
  // expected-error @+1 {{'dc.adamw' op micro_batches must be at least 1, got -2}}
  %a, %b, %c = dc.adamw %p, %p, %p, %p, %lr, %n, %s {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, max_grad_norm = 0.0 : f64, micro_batches = -2 : i64} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f64>, tensor<i64>, tensor<f64> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @bf16_sum(%g: tensor<8xbf16>, %s: tensor<8xbf16>) {
  // expected-error @+1 {{'dc.grad_accumulate' op the sum must be f32, got 'bf16'}}
  %r = dc.grad_accumulate %g, %s : tensor<8xbf16>, tensor<8xbf16>
  return
}

// -----

func.func @integer_grad_sum(%g: tensor<8xi32>, %s: tensor<8xf32>) {
  // expected-error @+1 {{'dc.grad_accumulate' op grad must have element type f32, bf16 or f16, got 'i32'}}
  %r = dc.grad_accumulate %g, %s : tensor<8xi32>, tensor<8xf32>
  return
}

// -----

shard.grid @world(shape = 2)

func.func @sum_of_another_sharding(%g: !dc.shard<tensor<8xbf16>, @world[0], local = 4>, %s: tensor<8xf32>) {
  // expected-error @+1 {{'dc.grad_accumulate' op the sum must have the parameter's shape and sharding '!dc.shard<tensor<8xbf16>, @world[0], local = 4>', got 'tensor<8xf32>'}}
  %r = dc.grad_accumulate %g, %s : !dc.shard<tensor<8xbf16>, @world[0], local = 4>, tensor<8xf32>
  return
}

// -----

func.func @accumulate_into_short(%g: memref<4xbf16>, %s: memref<3xf32>, %r: memref<4xf32>) {
  // expected-error @+1 {{'dc.grad_accumulate_into' op the sums must be f32 buffers of the gradient's 4 elements, got 'memref<3xf32>'}}
  dc.grad_accumulate_into %g, %s into %r full_numel = 8 shard_axis = 0 : memref<4xbf16>, memref<3xf32> into memref<4xf32>
  return
}

// -----

func.func @accumulate_into_bad_slot(%g: memref<4xbf16>, %s: memref<4xf32>, %r: memref<4xf32>) {
  // expected-error @+1 {{'dc.grad_accumulate_into' op buffers of 4 elements cannot be this rank's part of 2 elements (shard_axis 0)}}
  dc.grad_accumulate_into %g, %s into %r full_numel = 2 shard_axis = 0 : memref<4xbf16>, memref<4xf32> into memref<4xf32>
  return
}

// -----

func.func @squares_into_expert_on_split_axis(%g: memref<4xf32>, %s: memref<f64>) {
  // expected-error @+1 {{'dc.grad_squares_into' op expert_axis 0 must be a grid axis other than the one the gradient is split over (shard_axis 0)}}
  dc.grad_squares_into %g, %s into %s full_numel = 8 shard_axis = 0 {expert_axis = 0 : i64} : memref<4xf32>, memref<f64> into memref<f64>
  return
}

// -----

func.func @squares_into_no_micro_batches(%g: memref<4xf32>, %s: memref<f64>) {
  // expected-error @+1 {{'dc.grad_squares_into' op micro_batches must be at least 1, got 0}}
  dc.grad_squares_into %g, %s into %s full_numel = 8 shard_axis = 0 {micro_batches = 0 : i64} : memref<4xf32>, memref<f64> into memref<f64>
  return
}
