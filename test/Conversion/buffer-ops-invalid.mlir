// RUN: dc-opt %s --split-input-file --verify-diagnostics

shard.grid @world(shape = 2)

func.func @mixed_forms(%w: memref<15xf32>, %b: !dc.shard<tensor<7xf32>, @world[0], local = 4>) {
  // expected-error @+1 {{'dc.gather_start' op shard #1 is '!dc.shard<tensor<7xf32>, @world[0], local = 4>' but shard #0 is 'memref<15xf32>'; an op is either on tensors or on buffers}}
  %f:2 = dc.gather_start %w, %b : memref<15xf32>, !dc.shard<tensor<7xf32>, @world[0], local = 4> -> !dc.future<memref<6x5xf32>>, !dc.future<tensor<7xf32>>
  return
}

// -----

func.func @shard_buffer_not_flat(%w: memref<3x5xf32>) {
  // expected-error @+1 {{'dc.gather_start' op shard buffer #0 must be 1-D, got 'memref<3x5xf32>'}}
  %f = dc.gather_start %w : memref<3x5xf32> -> !dc.future<memref<6x5xf32>>
  return
}

// -----

func.func @shard_buffer_too_big(%w: memref<31xf32>) {
  // expected-error @+1 {{'dc.gather_start' op shard buffer #0 holds 31 elements; a slice of 'memref<6x5xf32>' holds 1 to 30}}
  %f = dc.gather_start %w : memref<31xf32> -> !dc.future<memref<6x5xf32>>
  return
}

// -----

func.func @gather_into_int(%w: memref<15xf32>) {
  // expected-error @+1 {{'dc.gather_start' op shard buffer #0 of 'f32' does not match 'i32' future #0}}
  %f = dc.gather_start %w : memref<15xf32> -> !dc.future<memref<6x5xi32>>
  return
}

// -----

func.func @gather_into_host(%w: memref<15xf32>) {
  // expected-error @+1 {{'dc.gather_start' op future #0 must be a device buffer, got 'memref<6x5xf32, #dc.host_memory>'}}
  %f = dc.gather_start %w : memref<15xf32> -> !dc.future<memref<6x5xf32, #dc.host_memory>>
  return
}

// -----

func.func @reduce_into_tensor(%g: memref<6x5xf32>) {
  // expected-error @+1 {{'dc.reduce_scatter_start' op future #0 must hold a shard buffer (memref)}}
  %f = dc.reduce_scatter_start average %g : memref<6x5xf32> -> !dc.future<tensor<15xf32>>
  return
}

// -----

func.func @strided_gradient(%g: memref<6x5xf32, strided<[10, 1]>>) {
  // expected-error @+1 {{'dc.reduce_scatter_start' op operand #0 must be variadic of ranked tensor of any type values or statically shaped identity-layout memref (device), but got 'memref<6x5xf32, strided<[10, 1]>>'}}
  %f = dc.reduce_scatter_start average %g : memref<6x5xf32, strided<[10, 1]>> -> !dc.future<memref<15xf32>>
  return
}

// -----

func.func @release_host(%h: memref<4xf32, #dc.host_memory>) {
  // expected-error @+1 {{'dc.release' op operand #0 must be ranked tensor of any type values or dc shard or statically shaped identity-layout memref (device), but got 'memref<4xf32, #dc.host_memory>'}}
  dc.release %h : memref<4xf32, #dc.host_memory>
  return
}

// -----

func.func @reload_device(%d: memref<4xf32>) {
  // expected-error @+1 {{'host' must be dc host value or statically shaped identity-layout memref in #dc.host_memory, but got 'memref<4xf32>'}}
  %f = dc.reload_start %d : memref<4xf32>
  return
}

// -----

func.func @reload_without_destination(%h: memref<4xf32, #dc.host_memory>) {
  // expected-error @+1 {{'dc.reload_start' op in buffer form needs a destination (`into`), the device buffer the copy writes}}
  %f = dc.reload_start %h : memref<4xf32, #dc.host_memory>
  return
}

// -----

func.func @reload_wrong_destination(%h: memref<4xf32, #dc.host_memory>, %d: memref<8xf32>) {
  // expected-error @+1 {{'dc.reload_start' op destination type 'memref<8xf32>' is not the reloaded buffer's type 'memref<4xf32>'}}
  %f = dc.reload_start %h into %d : memref<4xf32, #dc.host_memory> into memref<8xf32>
  return
}

// -----

func.func @reload_tensor_into(%h: !dc.host<tensor<4xf32>>, %d: memref<4xf32>) {
  // expected-error @+1 {{'dc.reload_start' op of a !dc.host value takes no destination; only the buffer form (a #dc.host_memory memref) copies into one}}
  %f = dc.reload_start %h into %d : !dc.host<tensor<4xf32>> into memref<4xf32>
  return
}

// -----

// A reloaded buffer is its reload's destination, a temporary: no release.
func.func @release_reloaded(%h: memref<4xf32, #dc.host_memory>, %d: memref<4xf32>) {
  %f = dc.reload_start %h into %d : memref<4xf32, #dc.host_memory> into memref<4xf32>
  %back = dc.wait %f : !dc.future<memref<4xf32>>
  // expected-error @+1 {{'dc.release' op releases a reloaded buffer; in buffer form that is the reload's destination, an ordinary temporary that lives until its last use (it has no release)}}
  dc.release %back : memref<4xf32>
  return
}

// -----

func.func @offload_wrong_future(%d: memref<4xf32>) {
  // expected-error @+1 {{'dc.offload_start' op failed to verify that result is a future of the value in host memory}}
  %f = "dc.offload_start"(%d) : (memref<4xf32>) -> !dc.future<memref<4xf32>>
  return
}

// -----

shard.grid @world(shape = 2)

func.func @all_to_all_buffers_with_result(%x: memref<2x8xf32>, %y: memref<4x4xf32>) {
  // expected-error @+1 {{'dc.all_to_all' op on buffers writes into an output buffer and has no result}}
  %r = "dc.all_to_all"(%x, %y) <{grid = @world, axis = 0 : i64, split_dim = 1 : i64, concat_dim = 0 : i64}> : (memref<2x8xf32>, memref<4x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

shard.grid @world(shape = 2)

func.func @all_to_all_tensors_with_output(%x: tensor<2x8xf32>, %y: memref<4x4xf32>) {
  // expected-error @+1 {{'dc.all_to_all' op on tensors has a result and no output buffer}}
  "dc.all_to_all"(%x, %y) <{grid = @world, axis = 0 : i64, split_dim = 1 : i64, concat_dim = 0 : i64}> : (tensor<2x8xf32>, memref<4x4xf32>) -> ()
  return
}

// -----

shard.grid @world(shape = 2)

func.func @all_to_all_buffer_shape(%x: memref<2x8xf32>, %y: memref<2x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all' op result shape must be 'memref<4x4xf32>' for an axis of size 2, got 'memref<2x8xf32>'}}
  dc.all_to_all %x on @world[0] split 1 concat 0 into %y : memref<2x8xf32> into memref<2x8xf32>
  return
}

// -----

// expected-error @+1 {{future must hold a statically shaped tensor, a !dc.shard, a !dc.host value or a statically shaped identity-layout memref, got 'memref<?xf32>'}}
func.func private @future_dynamic_memref(!dc.future<memref<?xf32>>)

// -----

// The buffer form's `axis` is the runtime's group: a grid axis, or -1 for
// the whole grid; nothing below.
func.func @gather_axis_below_all(%w: memref<4xf32>) {
  // expected-error @+1 {{'dc.gather_start' op has axis = -2; a group is a grid axis, or -1 for every axis of the grid}}
  %f = dc.gather_start %w {axis = -2 : i64} : memref<4xf32> -> !dc.future<memref<8xf32>>
  return
}

// -----

func.func @reduce_scatter_axis_below_all(%g: memref<8xf32>) {
  // expected-error @+1 {{'dc.reduce_scatter_start' op has axis = -3; a group is a grid axis, or -1 for every axis of the grid}}
  %f = dc.reduce_scatter_start sum %g {axis = -3 : i64} : memref<8xf32> -> !dc.future<memref<4xf32>>
  return
}
