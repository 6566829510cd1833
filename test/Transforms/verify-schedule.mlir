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
