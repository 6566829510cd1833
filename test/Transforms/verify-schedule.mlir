// RUN: dc-opt %s --dc-verify-schedule -split-input-file -verify-diagnostics | FileCheck %s

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8x8xf32>, @world[0], local = 32>

// A correct schedule passes unchanged.
// CHECK-LABEL: func.func @good
// CHECK: dc.gather_start
// CHECK: dc.release
func.func @good(%w: !w, %x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8x8xf32>>
  %full = dc.wait %f : !dc.future<tensor<8x8xf32>>
  %y = arith.addf %full, %x : tensor<8x8xf32>
  dc.release %full : tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8x8xf32>, @world[0], local = 32>
func.func @never_waited(%w: !w) {
  // expected-error @+1 {{future #0 is never waited}}
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8x8xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8x8xf32>, @world[0], local = 32>
func.func @waited_twice(%w: !w) {
  // expected-error @+1 {{future #0 is waited 2 times; it must be waited exactly once}}
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8x8xf32>>
  // expected-note @+1 {{waited here}}
  %a = dc.wait %f : !dc.future<tensor<8x8xf32>>
  // expected-note @+1 {{waited here}}
  %b = dc.wait %f : !dc.future<tensor<8x8xf32>>
  dc.release %a : tensor<8x8xf32>
  dc.release %b : tensor<8x8xf32>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8x8xf32>, @world[0], local = 32>
func.func @future_escapes(%w: !w) -> !dc.future<tensor<8x8xf32>> {
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8x8xf32>>
  // expected-error @+1 {{uses future #0 of 'dc.gather_start'; a future may only be taken by dc.wait or dc.end_backward}}
  return %f : !dc.future<tensor<8x8xf32>>
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8x8xf32>, @world[0], local = 32>
func.func @use_after_release(%w: !w, %x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8x8xf32>>
  %full = dc.wait %f : !dc.future<tensor<8x8xf32>>
  // expected-note @+1 {{released here}}
  dc.release %full : tensor<8x8xf32>
  // expected-error @+1 {{uses a gathered parameter after its dc.release}}
  %y = arith.addf %full, %x : tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8x8xf32>, @world[0], local = 32>
func.func @released_twice(%w: !w) {
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8x8xf32>>
  %full = dc.wait %f : !dc.future<tensor<8x8xf32>>
  // expected-note @+1 {{first released here}}
  dc.release %full : tensor<8x8xf32>
  // expected-error @+1 {{releases a gathered parameter twice}}
  dc.release %full : tensor<8x8xf32>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8x8xf32>, @world[0], local = 32>
func.func @leaked(%w: !w, %x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{gathers a parameter that is never released and not persistent}}
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8x8xf32>>
  %full = dc.wait %f : !dc.future<tensor<8x8xf32>>
  %y = arith.addf %full, %x : tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

// Persistent gathers stay live to the end of the step: not a leak.
shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8x8xf32>, @world[0], local = 32>
// CHECK-LABEL: func.func @persistent
func.func @persistent(%w: !w, %x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %f = dc.gather_start %w {persistent} : !w -> !dc.future<tensor<8x8xf32>>
  %full = dc.wait %f : !dc.future<tensor<8x8xf32>>
  %y = arith.addf %full, %x : tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

// Reloaded values (the wait of a dc.reload_start) follow the same rules as
// gathered ones, except that one never released is fine: the runtime keeps
// it until the step ends (the offload passes always release).
// CHECK-LABEL: func.func @reloaded_unreleased
// CHECK: dc.reload_start
func.func @reloaded_unreleased(%h: !dc.host<tensor<8x8xf32>>) -> tensor<8x8xf32> {
  %l = dc.reload_start %h : !dc.host<tensor<8x8xf32>>
  %r = dc.wait %l : !dc.future<tensor<8x8xf32>>
  %y = arith.addf %r, %r : tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

func.func @reloaded_use_after_release(%h: !dc.host<tensor<8x8xf32>>) -> tensor<8x8xf32> {
  %l = dc.reload_start %h : !dc.host<tensor<8x8xf32>>
  %r = dc.wait %l : !dc.future<tensor<8x8xf32>>
  // expected-note @+1 {{released here}}
  dc.release %r : tensor<8x8xf32>
  // expected-error @+1 {{uses a reloaded value after its dc.release}}
  %y = arith.addf %r, %r : tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

func.func @reloaded_view_after_release(%h: !dc.host<tensor<8x8xf32>>) -> tensor<64xf32> {
  %l = dc.reload_start %h : !dc.host<tensor<8x8xf32>>
  %r = dc.wait %l : !dc.future<tensor<8x8xf32>>
  %v = tensor.collapse_shape %r [[0, 1]] : tensor<8x8xf32> into tensor<64xf32>
  // expected-note @+1 {{released here}}
  dc.release %r : tensor<8x8xf32>
  // expected-error @+1 {{uses a reloaded value (through a view) after its dc.release}}
  %y = arith.negf %v : tensor<64xf32>
  return %y : tensor<64xf32>
}

// -----

func.func @reloaded_released_twice(%h: !dc.host<tensor<8x8xf32>>) {
  %l = dc.reload_start %h : !dc.host<tensor<8x8xf32>>
  %r = dc.wait %l : !dc.future<tensor<8x8xf32>>
  // expected-note @+1 {{first released here}}
  dc.release %r : tensor<8x8xf32>
  // expected-error @+1 {{releases a reloaded value twice}}
  dc.release %r : tensor<8x8xf32>
  return
}

// -----

// An uploaded shard is read by its gather until the gather's wait.
shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8x8xf32>, @world[0], local = 32>
func.func @upload_released_in_flight(%h: !dc.host<!w>) -> tensor<8x8xf32> {
  %u = dc.reload_start %h : !dc.host<!w>
  %s = dc.wait %u : !dc.future<!w>
  // expected-error @+1 {{reads a reloaded value until its future is waited, which is after the value's dc.release}}
  %g = dc.gather_start %s : !w -> !dc.future<tensor<8x8xf32>>
  // expected-note @+1 {{released here}}
  dc.release %s : !w
  // expected-note @+1 {{waited here}}
  %full = dc.wait %g : !dc.future<tensor<8x8xf32>>
  %y = arith.addf %full, %full : tensor<8x8xf32>
  dc.release %full : tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

// -----

// All-to-all (dc-ulysses): the start pairs with exactly one dc.wait like
// every other transfer. Waited once, it passes; in buffer form nothing may
// touch the output, nor write the input, before the wait.
shard.grid @world(shape = 2)
// CHECK-LABEL: func.func @exchange_good
// CHECK: dc.all_to_all_start
// CHECK: linalg.fill
// CHECK: dc.wait
func.func @exchange_good(%x: memref<4x8xf32>, %y: memref<8x4xf32>, %z: memref<4x8xf32>) -> memref<8x4xf32> {
  %c = arith.constant 1.0 : f32
  %f = dc.all_to_all_start %x on @world[0] split 1 concat 0 into %y : memref<4x8xf32> into memref<8x4xf32> -> !dc.future<memref<8x4xf32>>
  // Other buffers are free to use meanwhile.
  linalg.fill ins(%c : f32) outs(%z : memref<4x8xf32>)
  %r = dc.wait %f : !dc.future<memref<8x4xf32>>
  return %r : memref<8x4xf32>
}

// -----

shard.grid @world(shape = 2)
func.func @exchange_never_waited(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{future #0 is never waited}}
  %f = dc.all_to_all_start %x on @world[0] split 1 concat 0 : tensor<4x8xf32> -> !dc.future<tensor<8x4xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
func.func @exchange_waited_twice(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{future #0 is waited 2 times; it must be waited exactly once}}
  %f = dc.all_to_all_start %x on @world[0] split 1 concat 0 : tensor<4x8xf32> -> !dc.future<tensor<8x4xf32>>
  // expected-note @+1 {{waited here}}
  %a = dc.wait %f : !dc.future<tensor<8x4xf32>>
  // expected-note @+1 {{waited here}}
  %b = dc.wait %f : !dc.future<tensor<8x4xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
func.func @exchange_output_read_early(%x: memref<4x8xf32>, %y: memref<8x4xf32>, %z: memref<8x4xf32>) -> memref<8x4xf32> {
  // expected-note @+1 {{started here}}
  %f = dc.all_to_all_start %x on @world[0] split 1 concat 0 into %y : memref<4x8xf32> into memref<8x4xf32> -> !dc.future<memref<8x4xf32>>
  // expected-error @+1 {{uses the output buffer of a dc.all_to_all_start before its dc.wait; the exchange writes it until then}}
  memref.copy %y, %z : memref<8x4xf32> to memref<8x4xf32>
  // expected-note @+1 {{waited here}}
  %r = dc.wait %f : !dc.future<memref<8x4xf32>>
  return %r : memref<8x4xf32>
}

// -----

// Through a view of the output.
shard.grid @world(shape = 2)
func.func @exchange_output_view_early(%x: memref<4x8xf32>, %y: memref<8x4xf32>) -> memref<8x4xf32> {
  %c = arith.constant 0.0 : f32
  // expected-note @+1 {{started here}}
  %f = dc.all_to_all_start %x on @world[0] split 1 concat 0 into %y : memref<4x8xf32> into memref<8x4xf32> -> !dc.future<memref<8x4xf32>>
  %v = memref.collapse_shape %y [[0, 1]] : memref<8x4xf32> into memref<32xf32>
  // expected-error @+1 {{uses the output buffer of a dc.all_to_all_start before its dc.wait}}
  linalg.fill ins(%c : f32) outs(%v : memref<32xf32>)
  // expected-note @+1 {{waited here}}
  %r = dc.wait %f : !dc.future<memref<8x4xf32>>
  return %r : memref<8x4xf32>
}

// -----

// The input may be read meanwhile (both only read it), not written.
shard.grid @world(shape = 2)
func.func @exchange_input_written_early(%x: memref<4x8xf32>, %y: memref<8x4xf32>, %z: memref<4x8xf32>) -> memref<8x4xf32> {
  %c = arith.constant 0.0 : f32
  // expected-note @+1 {{started here}}
  %f = dc.all_to_all_start %x on @world[0] split 1 concat 0 into %y : memref<4x8xf32> into memref<8x4xf32> -> !dc.future<memref<8x4xf32>>
  memref.copy %x, %z : memref<4x8xf32> to memref<4x8xf32>
  // expected-error @+1 {{writes the input buffer of a dc.all_to_all_start before its dc.wait; the exchange reads it until then}}
  linalg.fill ins(%c : f32) outs(%x : memref<4x8xf32>)
  // expected-note @+1 {{waited here}}
  %r = dc.wait %f : !dc.future<memref<8x4xf32>>
  return %r : memref<8x4xf32>
}

// -----

// A gradient names the parameter it is of, with that parameter's shape and
// sharding (dc-run relies on both): dc.grad<param = 0> edited to param = 1
// is refused here, not first by dc-run.
shard.grid @world(shape = 2)
!w0 = !dc.shard<tensor<8x8xf32>, @world[0], local = 32>
!w1 = !dc.shard<tensor<8xf32>, @world[0], local = 4>
// expected-error @+1 {{result #1 has type '!dc.shard<tensor<8x8xf32>, @world[0], local = 32>', but it is the gradient of parameter id 1, argument #1 of type '!dc.shard<tensor<8xf32>, @world[0], local = 4>' (a gradient has its parameter's shape and sharding)}}
func.func @edited_grad(%w: !w0 {dc.param = #dc.param<id = 0>}, %b: !w1 {dc.param = #dc.param<id = 1>})
    -> (tensor<f32> {dc.loss}, !w0 {dc.grad = #dc.grad<param = 1>}) {
  %l = arith.constant dense<1.0> : tensor<f32>
  return %l, %w : tensor<f32>, !w0
}

// -----

// expected-error @+1 {{result #1 is the gradient of parameter id 7, which no argument declares}}
func.func @grad_of_nothing(%w: tensor<4xf32> {dc.param = #dc.param<id = 0>})
    -> (tensor<f32> {dc.loss}, tensor<4xf32> {dc.grad = #dc.grad<param = 7>}) {
  %l = arith.constant dense<1.0> : tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{results #1 and #2 are both the gradient of parameter id 0}}
func.func @two_grads(%w: tensor<4xf32> {dc.param = #dc.param<id = 0>})
    -> (tensor<f32> {dc.loss}, tensor<4xf32> {dc.grad = #dc.grad<param = 0>}, tensor<4xf32> {dc.grad = #dc.grad<param = 0>}) {
  %l = arith.constant dense<1.0> : tensor<f32>
  return %l, %w, %w : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A bf16 parameter's gradient may be f32 (the same shape); an integer one
// is no gradient.
// CHECK-LABEL: func.func @f32_grad_of_bf16
func.func @f32_grad_of_bf16(%w: tensor<4xbf16> {dc.param = #dc.param<id = 0>}, %g: tensor<4xf32>)
    -> (tensor<f32> {dc.loss}, tensor<4xf32> {dc.grad = #dc.grad<param = 0>}) {
  %l = arith.constant dense<1.0> : tensor<f32>
  return %l, %g : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{result #1 ('tensor<4xi32>') is the gradient of argument #0 ('tensor<4xf32>'): both must be floating point}}
func.func @integer_grad(%w: tensor<4xf32> {dc.param = #dc.param<id = 0>}, %g: tensor<4xi32>)
    -> (tensor<f32> {dc.loss}, tensor<4xi32> {dc.grad = #dc.grad<param = 0>}) {
  %l = arith.constant dense<1.0> : tensor<f32>
  return %l, %g : tensor<f32>, tensor<4xi32>
}
