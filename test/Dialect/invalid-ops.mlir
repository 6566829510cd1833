// RUN: dc-opt %s -split-input-file -verify-diagnostics

// Op verifiers (verify and verifySymbolUses) of the dc dialect, one rejected
// op per case. Cases without an expected error pin what stays legal.

//===----------------------------------------------------------------------===//
// dc.gather_start
//===----------------------------------------------------------------------===//

func.func @gather_nothing() {
  // expected-error @+1 {{'dc.gather_start' op needs at least one shard}}
  "dc.gather_start"() : () -> ()
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<4x8xf32>, @world[0], local = 16>

func.func @gather_count_mismatch(%w: !w) {
  // expected-error @+1 {{'dc.gather_start' op has 1 shards but 2 futures}}
  %f:2 = dc.gather_start %w : !w -> !dc.future<tensor<4x8xf32>>, !dc.future<tensor<4x8xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<4x8xf32>, @world[0], local = 16>

func.func @gather_into_shard(%w: !w) {
  // expected-error @+1 {{'dc.gather_start' op future #0 must hold a tensor}}
  %f = dc.gather_start %w : !w -> !dc.future<!w>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<4x8xf32>, @world[0], local = 16>
!b = !dc.shard<tensor<8xf32>, @world[0], local = 4>

func.func @gather_wrong_shape(%w: !w, %b: !b) {
  // expected-error @+1 {{'dc.gather_start' op future #1 holds 'tensor<4xf32>' but the shard's logical tensor is 'tensor<8xf32>'}}
  %f:2 = dc.gather_start %w, %b : !w, !b -> !dc.future<tensor<4x8xf32>>, !dc.future<tensor<4xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<4x8xf32>, @world[0], local = 16>

func.func @gather_transposed(%w: !w) {
  // expected-error @+1 {{'dc.gather_start' op future #0 holds 'tensor<8x4xf32>' but the shard's logical tensor is 'tensor<4x8xf32>'}}
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8x4xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
!i = !dc.shard<tensor<8xi32>, @world[0], local = 4>

func.func @gather_int_as_float(%i: !i) {
  // expected-error @+1 {{'dc.gather_start' op cannot gather 'i32' shard #0 as 'f32'}}
  %f = dc.gather_start %i : !i -> !dc.future<tensor<8xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>

func.func @gather_float_as_int(%w: !w, %v: !w) {
  // expected-error @+1 {{'dc.gather_start' op cannot gather 'f32' shard #1 as 'i16'}}
  %f:2 = dc.gather_start %w, %v : !w, !w -> !dc.future<tensor<8xf32>>, !dc.future<tensor<8xi16>>
  return
}

// -----

shard.grid @world(shape = 2)
!i = !dc.shard<tensor<8xi32>, @world[0], local = 4>

func.func @gather_narrow_int(%i: !i) {
  // expected-error @+1 {{'dc.gather_start' op cannot gather 'i32' shard #0 as 'i8'}}
  %f = dc.gather_start %i : !i -> !dc.future<tensor<8xi8>>
  return
}

// -----

shard.grid @world(shape = 2)
shard.grid @other(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>
!o = !dc.shard<tensor<8xf32>, @other[0], local = 4>

func.func @gather_two_grids(%w: !w, %o: !o) {
  // expected-error @+1 {{'dc.gather_start' op shard #1 is split over @other[0] but shard #0 over @world[0]; one group must use one communicator}}
  %f:2 = dc.gather_start %w, %o : !w, !o -> !dc.future<tensor<8xf32>>, !dc.future<tensor<8xf32>>
  return
}

// -----

shard.grid @grid2d(shape = 2x4)
!a0 = !dc.shard<tensor<8xf32>, @grid2d[0], local = 4>
!a1 = !dc.shard<tensor<8xf32>, @grid2d[1], local = 2>

func.func @gather_two_axes(%x: !a0, %y: !a0, %z: !a1) {
  // expected-error @+1 {{'dc.gather_start' op shard #2 is split over @grid2d[1] but shard #0 over @grid2d[0]; one group must use one communicator}}
  %f:3 = dc.gather_start %x, %y, %z : !a0, !a0, !a1 -> !dc.future<tensor<8xf32>>, !dc.future<tensor<8xf32>>, !dc.future<tensor<8xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>

func.func @gather_twice_in_group(%w: !w, %v: !w) {
  // expected-error @+1 {{'dc.gather_start' op shard #2 repeats shard #0; a group gathers each parameter once}}
  %f:3 = dc.gather_start %w, %v, %w : !w, !w, !w -> !dc.future<tensor<8xf32>>, !dc.future<tensor<8xf32>>, !dc.future<tensor<8xf32>>
  return
}

// -----

shard.grid @world(shape = 4)
!w = !dc.shard<tensor<10xf32>, @world[0], local = 2>

func.func @gather_wrong_local(%w: !w) {
  // expected-error @+1 {{'dc.gather_start' op shard '!dc.shard<tensor<10xf32>, @world[0], local = 2>' has local size 2 but ceil(10 / 4) = 3}}
  %f = dc.gather_start %w : !w -> !dc.future<tensor<10xf32>>
  return
}

// -----

!w = !dc.shard<tensor<8xf32>, @nowhere[0], local = 4>

func.func @gather_missing_grid(%w: !w) {
  // expected-error @+1 {{'dc.gather_start' op refers to grid @nowhere, which is not a shard.grid in scope}}
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8xf32>>
  return
}

// -----

!w = !dc.shard<tensor<8xf32>, @not_a_grid[0], local = 4>

func.func private @not_a_grid()

func.func @gather_grid_is_a_function(%w: !w) {
  // expected-error @+1 {{'dc.gather_start' op refers to grid @not_a_grid, which is not a shard.grid in scope}}
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8xf32>>
  return
}

// -----

// The grid must be visible from the op, not merely exist somewhere.
module @inner {
  shard.grid @hidden(shape = 2)
}

!w = !dc.shard<tensor<8xf32>, @hidden[0], local = 4>

func.func @gather_grid_out_of_scope(%w: !w) {
  // expected-error @+1 {{'dc.gather_start' op refers to grid @hidden, which is not a shard.grid in scope}}
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[1], local = 4>

func.func @gather_missing_axis(%w: !w) {
  // expected-error @+1 {{'dc.gather_start' op grid @world has 1 axes; axis 1 does not exist}}
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8xf32>>
  return
}

// -----

shard.grid @elastic(shape = 2x?)
!w = !dc.shard<tensor<8xf32>, @elastic[1], local = 4>

func.func @gather_dynamic_axis(%w: !w) {
  // expected-error @+1 {{'dc.gather_start' op axis 1 of grid @elastic is dynamic; dc needs the world size at compile time}}
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8xf32>>
  return
}

// -----

// The static axis of a partly dynamic grid is usable.
shard.grid @elastic(shape = 2x?)
!w = !dc.shard<tensor<8xf32>, @elastic[0], local = 4>

func.func @gather_static_axis_of_dynamic_grid(%w: !w) -> tensor<8xbf16> {
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8xbf16>>
  %full = dc.wait %f : !dc.future<tensor<8xbf16>>
  return %full : tensor<8xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// dc.wait
//===----------------------------------------------------------------------===//

func.func @wait_wrong_result(%f: !dc.future<tensor<8xf32>>) {
  // expected-error @+1 {{'dc.wait' op failed to verify that result type is the future's value type}}
  %w = "dc.wait"(%f) : (!dc.future<tensor<8xf32>>) -> tensor<8xbf16>
  return
}

// -----

func.func @wait_not_a_future(%x: tensor<8xf32>) {
  // expected-error @+1 {{'dc.wait' op operand #0 must be dc future, but got 'tensor<8xf32>'}}
  %w = "dc.wait"(%x) : (tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// dc.release
//===----------------------------------------------------------------------===//

func.func @release_argument(%x: tensor<8xf32>) {
  // expected-error @+1 {{'dc.release' op operand must be a gathered parameter or a reloaded value (the result of dc.wait on a dc.gather_start or dc.reload_start future)}}
  dc.release %x : tensor<8xf32>
  return
}

// -----

shard.grid @world(shape = 2)
!s = !dc.shard<tensor<8xf32>, @world[0], local = 4>

// A shard argument is the caller's; only a reloaded (uploaded) one may be
// released.
func.func @release_shard_argument(%s: !s) {
  // expected-error @+1 {{'dc.release' op operand must be a gathered parameter or a reloaded value}}
  dc.release %s : !s
  return
}

// -----

shard.grid @world(shape = 2)
!s = !dc.shard<tensor<8xf32>, @world[0], local = 4>

// A reduced gradient shard is the step's result, not a transfer to free.
func.func @release_reduced(%g: tensor<8xf32>) -> !s {
  %f = dc.reduce_scatter_start average %g : tensor<8xf32> -> !dc.future<!s>
  %s = dc.wait %f : !dc.future<!s>
  // expected-error @+1 {{'dc.release' op operand must be a gathered parameter or a reloaded value (the result of dc.wait on a dc.gather_start or dc.reload_start future)}}
  dc.release %s : !s
  return %s : !s
}

// -----

// A host copy is not on the device: the runtime returns it to the host pool
// when its reload completes.
func.func @release_host_copy(%x: tensor<8xf32>) {
  %f = dc.offload_start %x : tensor<8xf32>
  %h = dc.wait %f : !dc.future<!dc.host<tensor<8xf32>>>
  // expected-error @+1 {{'dc.release' op operand #0 must be ranked tensor of any type values or dc shard or statically shaped identity-layout memref (device), but got '!dc.host<tensor<8xf32>>'}}
  dc.release %h : !dc.host<tensor<8xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>

func.func @release_computed(%w: !w) {
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8xf32>>
  %full = dc.wait %f : !dc.future<tensor<8xf32>>
  %sum = arith.addf %full, %full : tensor<8xf32>
  dc.release %full : tensor<8xf32>
  // expected-error @+1 {{'dc.release' op operand must be a gathered parameter or a reloaded value}}
  dc.release %sum : tensor<8xf32>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>
!b = !dc.shard<tensor<2xf32>, @world[0], local = 1>

func.func @release_persistent(%w: !w, %b: !b) {
  %f:2 = dc.gather_start %w, %b {persistent} : !w, !b -> !dc.future<tensor<8xf32>>, !dc.future<tensor<2xf32>>
  %full = dc.wait %f#1 : !dc.future<tensor<2xf32>>
  // expected-error @+1 {{'dc.release' op releases a persistent gather; persistent gathers stay live until the end of the step}}
  dc.release %full : tensor<2xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// dc.reduce_scatter_start
//===----------------------------------------------------------------------===//

func.func @reduce_nothing() {
  // expected-error @+1 {{'dc.reduce_scatter_start' op needs at least one gradient}}
  "dc.reduce_scatter_start"() <{kind = #shard<partial sum>}> : () -> ()
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>

func.func @reduce_count_mismatch(%g: tensor<8xf32>, %h: tensor<8xf32>) {
  // expected-error @+1 {{'dc.reduce_scatter_start' op has 2 gradients but 1 futures}}
  %f = dc.reduce_scatter_start sum %g, %h : tensor<8xf32>, tensor<8xf32> -> !dc.future<!w>
  return
}

// -----

func.func @reduce_into_tensor(%g: tensor<8xf32>) {
  // expected-error @+1 {{'dc.reduce_scatter_start' op future #0 must hold a !dc.shard}}
  %f = dc.reduce_scatter_start sum %g : tensor<8xf32> -> !dc.future<tensor<8xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>
!m = !dc.shard<tensor<2x4xf32>, @world[0], local = 4>

func.func @reduce_wrong_shape(%g: tensor<8xf32>, %h: tensor<4x2xf32>) {
  // expected-error @+1 {{'dc.reduce_scatter_start' op gradient #1 is 'tensor<4x2xf32>' but its shard's logical tensor is 'tensor<2x4xf32>'}}
  %f:2 = dc.reduce_scatter_start average %g, %h : tensor<8xf32>, tensor<4x2xf32> -> !dc.future<!w>, !dc.future<!m>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>

func.func @reduce_dynamic_gradient(%g: tensor<?xf32>) {
  // expected-error @+1 {{'dc.reduce_scatter_start' op gradient #0 is 'tensor<?xf32>' but its shard's logical tensor is 'tensor<8xf32>'}}
  %f = dc.reduce_scatter_start average %g : tensor<?xf32> -> !dc.future<!w>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>

func.func @reduce_int_into_float(%g: tensor<8xi32>) {
  // expected-error @+1 {{'dc.reduce_scatter_start' op cannot reduce 'i32' gradient #0 into a 'f32' shard}}
  %f = dc.reduce_scatter_start sum %g : tensor<8xi32> -> !dc.future<!w>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>
!i = !dc.shard<tensor<8xi64>, @world[0], local = 4>

func.func @reduce_float_into_int(%g: tensor<8xf32>, %h: tensor<8xf32>) {
  // expected-error @+1 {{'dc.reduce_scatter_start' op cannot reduce 'f32' gradient #1 into a 'i64' shard}}
  %f:2 = dc.reduce_scatter_start sum %g, %h : tensor<8xf32>, tensor<8xf32> -> !dc.future<!w>, !dc.future<!i>
  return
}

// -----

shard.grid @grid2d(shape = 2x4)
!a0 = !dc.shard<tensor<8xf32>, @grid2d[0], local = 4>
!a1 = !dc.shard<tensor<8xf32>, @grid2d[1], local = 2>

func.func @reduce_two_axes(%g: tensor<8xf32>, %h: tensor<8xf32>) {
  // expected-error @+1 {{'dc.reduce_scatter_start' op gradient #1 is scattered over @grid2d[1] but gradient #0 over @grid2d[0]; one bucket must use one communicator}}
  %f:2 = dc.reduce_scatter_start average %g, %h : tensor<8xf32>, tensor<8xf32> -> !dc.future<!a0>, !dc.future<!a1>
  return
}

// -----

shard.grid @world(shape = 2)
shard.grid @other(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>
!o = !dc.shard<tensor<8xf32>, @other[0], local = 4>

func.func @reduce_two_grids(%g: tensor<8xf32>, %h: tensor<8xf32>) {
  // expected-error @+1 {{'dc.reduce_scatter_start' op gradient #2 is scattered over @other[0] but gradient #0 over @world[0]; one bucket must use one communicator}}
  %f:3 = dc.reduce_scatter_start average %g, %h, %g : tensor<8xf32>, tensor<8xf32>, tensor<8xf32> -> !dc.future<!w>, !dc.future<!w>, !dc.future<!o>
  return
}

// -----

// One gradient value may feed two parameters' shards (e.g. after CSE).
shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>

func.func @reduce_same_gradient_twice(%g: tensor<8xf32>) -> (!w, !w) {
  %f:2 = dc.reduce_scatter_start average %g, %g : tensor<8xf32>, tensor<8xf32> -> !dc.future<!w>, !dc.future<!w>
  %s:2 = dc.end_backward %f#0, %f#1 : !dc.future<!w>, !dc.future<!w>
  return %s#0, %s#1 : !w, !w
}

// -----

shard.grid @world(shape = 3)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>

func.func @reduce_wrong_local(%g: tensor<8xf32>) {
  // expected-error @+1 {{'dc.reduce_scatter_start' op shard '!dc.shard<tensor<8xf32>, @world[0], local = 4>' has local size 4 but ceil(8 / 3) = 3}}
  %f = dc.reduce_scatter_start sum %g : tensor<8xf32> -> !dc.future<!w>
  return
}

// -----

!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>

func.func @reduce_missing_grid(%g: tensor<8xf32>) {
  // expected-error @+1 {{'dc.reduce_scatter_start' op refers to grid @world, which is not a shard.grid in scope}}
  %f = dc.reduce_scatter_start sum %g : tensor<8xf32> -> !dc.future<!w>
  return
}

// -----

//===----------------------------------------------------------------------===//
// dc.end_backward
//===----------------------------------------------------------------------===//

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>

func.func @end_backward_of_reload(%g: tensor<8xf32>, %h: !dc.host<!w>) {
  %r = dc.reduce_scatter_start sum %g : tensor<8xf32> -> !dc.future<!w>
  %l = dc.reload_start %h : !dc.host<!w>
  // expected-error @+1 {{'dc.end_backward' op operand #1 is not a dc.reduce_scatter_start future}}
  %s:2 = dc.end_backward %r, %l : !dc.future<!w>, !dc.future<!w>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>

func.func @end_backward_of_argument(%f: !dc.future<!w>) {
  // expected-error @+1 {{'dc.end_backward' op operand #0 is not a dc.reduce_scatter_start future}}
  %s = dc.end_backward %f : !dc.future<!w>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>

func.func @end_backward_twice(%g: tensor<8xf32>) {
  %r:2 = dc.reduce_scatter_start sum %g, %g : tensor<8xf32>, tensor<8xf32> -> !dc.future<!w>, !dc.future<!w>
  // expected-error @+1 {{'dc.end_backward' op operand #2 repeats operand #1; each future is taken exactly once}}
  %s:3 = dc.end_backward %r#0, %r#1, %r#1 : !dc.future<!w>, !dc.future<!w>, !dc.future<!w>
  return
}

// -----

func.func @end_backward_of_tensor(%x: tensor<8xf32>) {
  // expected-error @+1 {{operand is not a !dc.future}}
  %s = dc.end_backward %x : tensor<8xf32>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>
!v = !dc.shard<tensor<8xbf16>, @world[0], local = 4>

func.func @end_backward_wrong_result(%g: tensor<8xf32>) {
  %r = dc.reduce_scatter_start sum %g : tensor<8xf32> -> !dc.future<!w>
  // expected-error @+2 {{'dc.end_backward' op failed to infer returned types}}
  // expected-error @+1 {{'dc.end_backward' op inferred type(s) '!dc.shard<tensor<8xf32>, @world[0], local = 4>' are incompatible with return type(s) of operation '!dc.shard<tensor<8xbf16>, @world[0], local = 4>'}}
  %s = "dc.end_backward"(%r) : (!dc.future<!w>) -> !v
  return
}

// -----

//===----------------------------------------------------------------------===//
// dc.offload_start, dc.reload_start
//===----------------------------------------------------------------------===//

func.func @offload_dynamic(%x: tensor<?x4xf32>) {
  // expected-error @+1 {{'value' must be statically shaped tensor of any type values or dc shard or statically shaped identity-layout memref (device), but got 'tensor<?x4xf32>'}}
  %f = dc.offload_start %x : tensor<?x4xf32>
  return
}

// -----

func.func @offload_wrong_future(%x: tensor<8xf32>) {
  // expected-error @+1 {{'dc.offload_start' op failed to verify that result is a future of the value in host memory}}
  %f = "dc.offload_start"(%x) : (tensor<8xf32>) -> !dc.future<tensor<8xf32>>
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 3>

func.func @offload_wrong_local(%w: !w) {
  // expected-error @+1 {{'dc.offload_start' op shard '!dc.shard<tensor<8xf32>, @world[0], local = 3>' has local size 3 but ceil(8 / 2) = 4}}
  %f = dc.offload_start %w : !w
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 3>

func.func @reload_wrong_local(%h: !dc.host<!w>) {
  // expected-error @+1 {{'dc.reload_start' op shard '!dc.shard<tensor<8xf32>, @world[0], local = 3>' has local size 3 but ceil(8 / 2) = 4}}
  %f = dc.reload_start %h : !dc.host<!w>
  return
}

// -----

!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>

func.func @reload_missing_grid(%h: !dc.host<!w>) {
  // expected-error @+1 {{'dc.reload_start' op refers to grid @world, which is not a shard.grid in scope}}
  %f = dc.reload_start %h : !dc.host<!w>
  return
}

// -----

func.func @reload_wrong_future(%h: !dc.host<tensor<8xf32>>) {
  // expected-error @+1 {{'dc.reload_start' op failed to verify that result is a future of the device value}}
  %f = "dc.reload_start"(%h) : (!dc.host<tensor<8xf32>>) -> !dc.future<!dc.host<tensor<8xf32>>>
  return
}

// -----

//===----------------------------------------------------------------------===//
// dc.all_reduce_start
//===----------------------------------------------------------------------===//

shard.grid @world(shape = 2)

func.func @all_reduce_dynamic(%g: tensor<?xf32>) {
  // expected-error @+1 {{'input' must be statically shaped tensor of any type values or dc shard or statically shaped identity-layout memref (device), but got 'tensor<?xf32>'}}
  %f = dc.all_reduce_start average %g on @world[0] : tensor<?xf32>
  return
}

// -----

shard.grid @world(shape = 2)

func.func @all_reduce_missing_axis(%g: tensor<8xf32>) {
  // expected-error @+1 {{'dc.all_reduce_start' op grid @world has 1 axes; axis 3 does not exist}}
  %f = dc.all_reduce_start average %g on @world[3] : tensor<8xf32>
  return
}

// -----

shard.grid @nodes(shape = 2x4)

// A shard is all-reduced over the axis its slices repeat along; over the
// axis it is split over it would sum different slices.
func.func @all_reduce_shard_own_axis(%s: !dc.shard<tensor<8xf32>, @nodes[1], local = 2>) {
  // expected-error @+1 {{'dc.all_reduce_start' op all-reduces a shard of @nodes[1] over @nodes[1]; a shard is all-reduced over another axis of its own grid}}
  %f = dc.all_reduce_start average %s on @nodes[1] : !dc.shard<tensor<8xf32>, @nodes[1], local = 2>
  return
}

// -----

shard.grid @nodes(shape = 2x4)
shard.grid @world(shape = 8)

func.func @all_reduce_shard_other_grid(%s: !dc.shard<tensor<8xf32>, @nodes[1], local = 2>) {
  // expected-error @+1 {{'dc.all_reduce_start' op all-reduces a shard of @nodes[1] over @world[0]; a shard is all-reduced over another axis of its own grid}}
  %f = dc.all_reduce_start average %s on @world[0] : !dc.shard<tensor<8xf32>, @nodes[1], local = 2>
  return
}

// -----

//===----------------------------------------------------------------------===//
// dc.all_to_all
//===----------------------------------------------------------------------===//

shard.grid @world(shape = 4)

func.func @all_to_all_dynamic(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all' op needs statically shaped tensors}}
  %y = dc.all_to_all %x on @world[0] split 1 concat 0 : tensor<?x8xf32> -> tensor<?x2xf32>
  return
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_rank(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all' op result rank 3 differs from input rank 2}}
  %y = dc.all_to_all %x on @world[0] split 1 concat 0 : tensor<4x8xf32> -> tensor<16x2x1xf32>
  return
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_dtype(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all' op must not change the element type}}
  %y = dc.all_to_all %x on @world[0] split 1 concat 0 : tensor<4x8xf32> -> tensor<16x2xbf16>
  return
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_split_dim(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all' op split_dim 2 is out of range for a rank-2 tensor}}
  %y = dc.all_to_all %x on @world[0] split 2 concat 0 : tensor<4x8xf32> -> tensor<16x2xf32>
  return
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_concat_dim(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all' op concat_dim -1 is out of range for a rank-2 tensor}}
  %y = dc.all_to_all %x on @world[0] split 1 concat -1 : tensor<4x8xf32> -> tensor<16x2xf32>
  return
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_scalar(%x: tensor<f32>) {
  // expected-error @+1 {{'dc.all_to_all' op split_dim 0 is out of range for a rank-0 tensor}}
  %y = dc.all_to_all %x on @world[0] split 0 concat 0 : tensor<f32> -> tensor<f32>
  return
}

// -----

func.func @all_to_all_missing_grid(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all' op refers to grid @world, which is not a shard.grid in scope}}
  %y = dc.all_to_all %x on @world[0] split 1 concat 0 : tensor<4x8xf32> -> tensor<16x2xf32>
  return
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_negative_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all' op grid @world has 1 axes; axis -1 does not exist}}
  %y = dc.all_to_all %x on @world[-1] split 1 concat 0 : tensor<4x8xf32> -> tensor<16x2xf32>
  return
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_missing_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all' op grid @world has 1 axes; axis 1 does not exist}}
  %y = dc.all_to_all %x on @world[1] split 1 concat 0 : tensor<4x8xf32> -> tensor<16x2xf32>
  return
}

// -----

shard.grid @elastic(shape = ?)

func.func @all_to_all_dynamic_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all' op axis 0 of grid @elastic is dynamic; dc needs the world size at compile time}}
  %y = dc.all_to_all %x on @elastic[0] split 1 concat 0 : tensor<4x8xf32> -> tensor<16x2xf32>
  return
}

// -----

shard.grid @world(shape = 3)

func.func @all_to_all_indivisible(%x: tensor<3x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all' op split dim 1 of size 8 is not divisible by the axis size 3}}
  %y = dc.all_to_all %x on @world[0] split 1 concat 0 : tensor<3x8xf32> -> tensor<9x8xf32>
  return
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_swapped_result(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all' op result shape must be 'tensor<16x2xf32>' for an axis of size 4, got 'tensor<1x32xf32>'}}
  %y = dc.all_to_all %x on @world[0] split 1 concat 0 : tensor<4x8xf32> -> tensor<1x32xf32>
  return
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_same_dim_reshaped(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all' op result shape must be 'tensor<4x8xf32>' for an axis of size 4, got 'tensor<16x2xf32>'}}
  %y = dc.all_to_all %x on @world[0] split 1 concat 1 : tensor<4x8xf32> -> tensor<16x2xf32>
  return
}

// -----

// split_dim == concat_dim is a general all-to-all: the shape is unchanged
// and blocks of the dim move between ranks.
shard.grid @world(shape = 4)

func.func @all_to_all_same_dim(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = dc.all_to_all %x on @world[0] split 1 concat 1 : tensor<4x8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_same_dim_indivisible(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{'dc.all_to_all' op split dim 1 of size 6 is not divisible by the axis size 4}}
  %y = dc.all_to_all %x on @world[0] split 1 concat 1 : tensor<4x6xf32> -> tensor<4x6xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// dc.all_to_all_start: the shape rule of dc.all_to_all, on the future's value
//===----------------------------------------------------------------------===//

shard.grid @world(shape = 4)

func.func @all_to_all_start_swapped_result(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all_start' op result shape must be 'tensor<16x2xf32>' for an axis of size 4, got 'tensor<1x32xf32>'}}
  %f = dc.all_to_all_start %x on @world[0] split 1 concat 0 : tensor<4x8xf32> -> !dc.future<tensor<1x32xf32>>
  return
}

// -----

shard.grid @world(shape = 3)

func.func @all_to_all_start_indivisible(%x: tensor<3x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all_start' op split dim 1 of size 8 is not divisible by the axis size 3}}
  %f = dc.all_to_all_start %x on @world[0] split 1 concat 0 : tensor<3x8xf32> -> !dc.future<tensor<9x8xf32>>
  return
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_start_dtype(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all_start' op must not change the element type}}
  %f = dc.all_to_all_start %x on @world[0] split 1 concat 0 : tensor<4x8xf32> -> !dc.future<tensor<16x2xbf16>>
  return
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_start_split_dim(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all_start' op split_dim 2 is out of range for a rank-2 tensor}}
  %f = dc.all_to_all_start %x on @world[0] split 2 concat 0 : tensor<4x8xf32> -> !dc.future<tensor<16x2xf32>>
  return
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_start_dynamic(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all_start' op needs statically shaped tensors}}
  %f = dc.all_to_all_start %x on @world[0] split 1 concat 0 : tensor<?x8xf32> -> !dc.future<tensor<16x2xf32>>
  return
}

// -----

func.func @all_to_all_start_missing_grid(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all_start' op refers to grid @world, which is not a shard.grid in scope}}
  %f = dc.all_to_all_start %x on @world[0] split 1 concat 0 : tensor<4x8xf32> -> !dc.future<tensor<16x2xf32>>
  return
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_start_missing_axis(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all_start' op grid @world has 1 axes; axis 1 does not exist}}
  %f = dc.all_to_all_start %x on @world[1] split 1 concat 0 : tensor<4x8xf32> -> !dc.future<tensor<16x2xf32>>
  return
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_start_shard_future(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all_start' op future must hold a ranked tensor like its input, got '!dc.shard<tensor<4x8xf32>, @world[0], local = 8>'}}
  %f = dc.all_to_all_start %x on @world[0] split 1 concat 0 : tensor<4x8xf32> -> !dc.future<!dc.shard<tensor<4x8xf32>, @world[0], local = 8>>
  return
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_start_tensor_into(%x: tensor<4x8xf32>, %y: memref<16x2xf32>) {
  // expected-error @+1 {{'dc.all_to_all_start' op on tensors takes no output buffer; only the buffer form exchanges into one}}
  %f = dc.all_to_all_start %x on @world[0] split 1 concat 0 into %y : tensor<4x8xf32> into memref<16x2xf32> -> !dc.future<tensor<16x2xf32>>
  return
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_start_no_output(%x: memref<4x8xf32>) {
  // expected-error @+1 {{'dc.all_to_all_start' op in buffer form needs an output buffer (`into`), the device buffer the exchange writes}}
  %f = dc.all_to_all_start %x on @world[0] split 1 concat 0 : memref<4x8xf32> -> !dc.future<memref<16x2xf32>>
  return
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_start_buffer_tensor_future(%x: memref<4x8xf32>, %y: memref<16x2xf32>) {
  // expected-error @+1 {{'dc.all_to_all_start' op future must hold a buffer like its input, got 'tensor<16x2xf32>'}}
  %f = dc.all_to_all_start %x on @world[0] split 1 concat 0 into %y : memref<4x8xf32> into memref<16x2xf32> -> !dc.future<tensor<16x2xf32>>
  return
}

// -----

shard.grid @world(shape = 4)

func.func @all_to_all_start_output_type(%x: memref<4x8xf32>, %y: memref<32xf32>) {
  // expected-error @+1 {{'dc.all_to_all_start' op output type 'memref<32xf32>' is not the future's value type 'memref<16x2xf32>'}}
  %f = dc.all_to_all_start %x on @world[0] split 1 concat 0 into %y : memref<4x8xf32> into memref<32xf32> -> !dc.future<memref<16x2xf32>>
  return
}

// -----

//===----------------------------------------------------------------------===//
// dc.invalidate_gathered
//===----------------------------------------------------------------------===//

shard.grid @world(shape = 8)
!w = !dc.shard<tensor<10xf32>, @world[0], local = 1>

func.func @invalidate_wrong_local(%w: !w) {
  // expected-error @+1 {{'dc.invalidate_gathered' op shard '!dc.shard<tensor<10xf32>, @world[0], local = 1>' has local size 1 but ceil(10 / 8) = 2}}
  dc.invalidate_gathered %w : !w
  return
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<10xf32>, @world[2], local = 5>

func.func @invalidate_missing_axis(%w: !w) {
  // expected-error @+1 {{'dc.invalidate_gathered' op grid @world has 1 axes; axis 2 does not exist}}
  dc.invalidate_gathered %w : !w
  return
}

//===----------------------------------------------------------------------===//
// What the runtime would abort on: reductions other than sum and average,
// integer gradients, averages of integers, reloads of host buffers the
// runtime does not know
//===----------------------------------------------------------------------===//

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>

func.func @reduce_scatter_by_max(%g: tensor<8xf32>) {
  // expected-error @+1 {{'dc.reduce_scatter_start' op reduces by max; dc reduces by sum or average}}
  %f = dc.reduce_scatter_start max %g : tensor<8xf32> -> !dc.future<!w>
  return
}

// -----

shard.grid @world(shape = 2)
!i = !dc.shard<tensor<8xi32>, @world[0], local = 4>

func.func @reduce_scatter_int_gradient(%g: tensor<8xi32>) {
  // expected-error @+1 {{'dc.reduce_scatter_start' op gradient #0 is 'i32'; only float gradients are reduced}}
  %f = dc.reduce_scatter_start sum %g : tensor<8xi32> -> !dc.future<!i>
  return
}

// -----

func.func @reduce_scatter_int_gradient_buffer(%g: memref<8xi32>) {
  // expected-error @+1 {{'dc.reduce_scatter_start' op gradient #0 is 'i32'; only float gradients are reduced}}
  %f = dc.reduce_scatter_start average %g : memref<8xi32> -> !dc.future<memref<4xi32>>
  return
}

// -----

shard.grid @world(shape = 2)

func.func @all_reduce_by_product(%g: tensor<8xf32>) {
  // expected-error @+1 {{'dc.all_reduce_start' op reduces by product; dc reduces by sum or average}}
  %f = dc.all_reduce_start product %g on @world[0] : tensor<8xf32>
  return
}

// -----

shard.grid @world(shape = 2)

func.func @all_reduce_average_of_ints(%g: tensor<8xi32>) {
  // expected-error @+1 {{'dc.all_reduce_start' op cannot average 'i32' values; use sum}}
  %f = dc.all_reduce_start average %g on @world[0] : tensor<8xi32>
  return
}

// -----

// Summing integers (e.g. token counts) is defined.
shard.grid @world(shape = 2)

func.func @all_reduce_sum_of_ints(%g: tensor<8xi32>) -> tensor<8xi32> {
  %f = dc.all_reduce_start sum %g on @world[0] : tensor<8xi32>
  %r = dc.wait %f : !dc.future<tensor<8xi32>>
  return %r : tensor<8xi32>
}

// -----

// A host buffer that is neither a step argument nor an offloaded copy: the
// runtime has no call that brings it back.
func.func @reload_of_unknown_host_buffer() {
  %h = memref.alloc() : memref<4xf32, #dc.host_memory>
  %dst = memref.alloc() : memref<4xf32>
  // expected-error @+1 {{'dc.reload_start' op reloads a host value that is neither a step argument (a parameter kept in host memory) nor the host copy of a dc.offload_start (the dc.wait of its future)}}
  %f = dc.reload_start %h into %dst : memref<4xf32, #dc.host_memory> into memref<4xf32>
  %d = dc.wait %f : !dc.future<memref<4xf32>>
  return
}

// -----

// A write-back goes into the caller's buffer, a step argument, only.
func.func @download_into_a_pool_copy(%v: tensor<4xf32>) {
  %f = dc.offload_start %v : tensor<4xf32>
  %h = dc.wait %f : !dc.future<!dc.host<tensor<4xf32>>>
  // expected-error @+1 {{'dc.offload_start' op writes into a host value that is not a step argument (the caller's buffer)}}
  %g = dc.offload_start %v into %h : tensor<4xf32> into !dc.host<tensor<4xf32>>
  %d = dc.wait %g : !dc.future<!dc.host<tensor<4xf32>>>
  return
}

// -----

func.func @download_into_another_type(%v: tensor<4xf32>, %h: !dc.host<tensor<8xf32>>) {
  // expected-error @+1 {{'dc.offload_start' op destination type '!dc.host<tensor<8xf32>>' is not the host value's type '!dc.host<tensor<4xf32>>'}}
  %f = dc.offload_start %v into %h : tensor<4xf32> into !dc.host<tensor<8xf32>>
  return
}

// -----

func.func @step_arena_not_bytes() {
  // expected-error @+1 {{'dc.step_arena' op must be a non-empty, statically sized 1-D i8 buffer in device memory, got 'memref<16xf32>'}}
  %a = dc.step_arena : memref<16xf32>
  return
}

// -----

// A grid axis of 0 ranks (shard.grid takes it) is no world: the shard and
// all-to-all checks would divide by it (found by dc-fuzz-ir).
shard.grid @empty(shape = 0)
func.func @all_to_all_on_empty_axis(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'dc.all_to_all' op axis 0 of grid @empty has 0 ranks; dc needs at least 1}}
  %y = dc.all_to_all %x on @empty[0] split 1 concat 1 : tensor<4x8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

func.func @step_arena_dynamic() {
  // expected-error @+1 {{'dc.step_arena' op must be a non-empty, statically sized 1-D i8 buffer in device memory, got 'memref<?xi8>'}}
  %a = dc.step_arena : memref<?xi8>
  return
}

// -----

func.func @step_arena_host() {
  // expected-error @+1 {{'dc.step_arena' op must be a non-empty, statically sized 1-D i8 buffer in device memory, got 'memref<64xi8, #dc.host_memory>'}}
  %a = dc.step_arena : memref<64xi8, #dc.host_memory>
  return
}

// -----

shard.grid @empty(shape = 0)
func.func @gather_on_empty_axis(%w: !dc.shard<tensor<8xf32>, @empty[0], local = 4>) -> tensor<8xf32> {
  // expected-error @+1 {{'dc.gather_start' op axis 0 of grid @empty has 0 ranks; dc needs at least 1}}
  %f = dc.gather_start %w : !dc.shard<tensor<8xf32>, @empty[0], local = 4> -> !dc.future<tensor<8xf32>>
  %g = dc.wait %f : !dc.future<tensor<8xf32>>
  return %g : tensor<8xf32>
}

// -----

// `axis` keeps a buffer-form op's shard axis; on shards it must be theirs.
shard.grid @grid2d(shape = 2x4)
!a0 = !dc.shard<tensor<8xf32>, @grid2d[0], local = 4>

func.func @gather_wrong_axis(%x: !a0) {
  // expected-error @+1 {{'dc.gather_start' op has axis = 1 but its shards are split over @grid2d[0]}}
  %f = dc.gather_start %x {axis = 1 : i64} : !a0 -> !dc.future<tensor<8xf32>>
  return
}

// -----

shard.grid @grid2d(shape = 2x4)
!a1 = !dc.shard<tensor<8xf32>, @grid2d[1], local = 2>

func.func @reduce_scatter_wrong_axis(%g: tensor<8xf32>) {
  // expected-error @+1 {{'dc.reduce_scatter_start' op has axis = 0 but its shards are split over @grid2d[1]}}
  %f = dc.reduce_scatter_start sum %g {axis = 0 : i64} : tensor<8xf32> -> !dc.future<!a1>
  return
}

// -----

// Shards over several axes: the runtime has a group per axis and one for
// the whole grid, so a shard spans one axis or all of them.
shard.grid @grid3d(shape = 2x2x2)

func.func @gather_two_of_three_axes(%x: !dc.shard<tensor<8xf32>, @grid3d[0, 1], local = 2>) {
  // expected-error @+1 {{'dc.gather_start' op shard '!dc.shard<tensor<8xf32>, @grid3d[0, 1], local = 2>' is split over 2 of the 3 axes of grid @grid3d; a shard is split over one axis or every axis of its grid}}
  %f = dc.gather_start %x : !dc.shard<tensor<8xf32>, @grid3d[0, 1], local = 2> -> !dc.future<tensor<8xf32>>
  return
}

// -----

// The local size counts the ranks of every axis (2 x 4 = 8).
shard.grid @grid2d(shape = 2x4)

func.func @gather_all_axes_local(%x: !dc.shard<tensor<16xf32>, @grid2d[0, 1], local = 8>) {
  // expected-error @+1 {{'dc.gather_start' op shard '!dc.shard<tensor<16xf32>, @grid2d[0, 1], local = 8>' has local size 8}}
  %f = dc.gather_start %x : !dc.shard<tensor<16xf32>, @grid2d[0, 1], local = 8> -> !dc.future<tensor<16xf32>>
  return
}

// -----

shard.grid @grid2d(shape = 2x4)
!all = !dc.shard<tensor<16xf32>, @grid2d[0, 1], local = 2>
!a0 = !dc.shard<tensor<16xf32>, @grid2d[0], local = 8>

func.func @gather_all_and_one_axis(%x: !all, %y: !a0) {
  // expected-error @+1 {{'dc.gather_start' op shard #1 is split over @grid2d[0] but shard #0 over @grid2d[0, 1]; one group must use one communicator}}
  %f:2 = dc.gather_start %x, %y : !all, !a0 -> !dc.future<tensor<16xf32>>, !dc.future<tensor<16xf32>>
  return
}

// -----

// On shards over the whole grid, the buffer form's `axis` is -1
// (DCRT_ALL_AXES), not one of the axes.
shard.grid @grid2d(shape = 2x4)
!all = !dc.shard<tensor<16xf32>, @grid2d[0, 1], local = 2>

func.func @reduce_scatter_all_axes_wrong_axis(%g: tensor<16xf32>) {
  // expected-error @+1 {{'dc.reduce_scatter_start' op has axis = 1 but its shards are split over @grid2d[0, 1]}}
  %f = dc.reduce_scatter_start sum %g {axis = 1 : i64} : tensor<16xf32> -> !dc.future<!all>
  return
}

// -----

// A shard over every axis has no axis left to be all-reduced over.
shard.grid @grid2d(shape = 2x4)

func.func @all_reduce_shard_of_all_axes(%s: !dc.shard<tensor<16xf32>, @grid2d[0, 1], local = 2>) {
  // expected-error @+1 {{'dc.all_reduce_start' op all-reduces a shard of @grid2d[0, 1] over @grid2d[0]; a shard is all-reduced over another axis of its own grid}}
  %f = dc.all_reduce_start sum %s on @grid2d[0] : !dc.shard<tensor<16xf32>, @grid2d[0, 1], local = 2>
  return
}

// -----

//===----------------------------------------------------------------------===//
// dc.check_finite
//===----------------------------------------------------------------------===//

func.func @check_finite_integers(%t: memref<4xi32>) {
  // expected-error @+1 {{'dc.check_finite' op checks f32, bf16 or f16 buffers, got 'memref<4xi32>'}}
  dc.check_finite %t, "index" : memref<4xi32>
  return
}

// -----

func.func @check_finite_strided(%t: memref<4x4xf32, strided<[8, 1]>>) {
  // expected-error @+1 {{'dc.check_finite' op needs a statically shaped, contiguous buffer in device memory, got 'memref<4x4xf32, strided<[8, 1]>>'}}
  dc.check_finite %t, "slice" : memref<4x4xf32, strided<[8, 1]>>
  return
}

// -----

func.func @check_finite_dynamic(%t: memref<?xf32>) {
  // expected-error @+1 {{'dc.check_finite' op needs a statically shaped, contiguous buffer in device memory, got 'memref<?xf32>'}}
  dc.check_finite %t, "dynamic" : memref<?xf32>
  return
}

// -----

func.func @check_finite_host(%t: memref<4xf32, #dc.host_memory>) {
  // expected-error @+1 {{'dc.check_finite' op needs a statically shaped, contiguous buffer in device memory, got 'memref<4xf32, #dc.host_memory>'}}
  dc.check_finite %t, "offloaded" : memref<4xf32, #dc.host_memory>
  return
}
