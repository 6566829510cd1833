// RUN: dc-opt %s --verify-roundtrip | FileCheck %s
// RUN: dc-opt %s --mlir-print-op-generic | dc-opt | FileCheck %s

shard.grid @world(shape = 2)
shard.grid @grid2d(shape = 2x4)

!w = !dc.shard<tensor<6x5xf32>, @world[0], local = 15>
!b = !dc.shard<tensor<7xf32>, @world[0], local = 4>

// CHECK-LABEL: func.func @gather_wait_release
// CHECK-SAME: {dc.param = #dc.param<id = 0, name = "fc.weight">}
// CHECK-SAME: {dc.param = #dc.param<id = 1>}
func.func @gather_wait_release(%w: !w {dc.param = #dc.param<id = 0, name = "fc.weight">},
                               %b: !b {dc.param = #dc.param<id = 1>}) -> tensor<6x5xf32> {
  // CHECK: %[[F:.*]]:2 = dc.gather_start %{{.*}}, %{{.*}} : !dc.shard<tensor<6x5xf32>, @world[0], local = 15>, !dc.shard<tensor<7xf32>, @world[0], local = 4> -> !dc.future<tensor<6x5xf32>>, !dc.future<tensor<7xf32>>
  %f:2 = dc.gather_start %w, %b : !w, !b -> !dc.future<tensor<6x5xf32>>, !dc.future<tensor<7xf32>>
  // CHECK: %[[W:.*]] = dc.wait %[[F]]#0 : !dc.future<tensor<6x5xf32>>
  %full = dc.wait %f#0 : !dc.future<tensor<6x5xf32>>
  %bias = dc.wait %f#1 : !dc.future<tensor<7xf32>>
  %sum = arith.addf %full, %full : tensor<6x5xf32>
  // CHECK: dc.release %[[W]] : tensor<6x5xf32>
  dc.release %full : tensor<6x5xf32>
  dc.release %bias : tensor<7xf32>
  return %sum : tensor<6x5xf32>
}

// CHECK-LABEL: func.func @gather_cast_persistent
// CHECK: dc.gather_start %{{.*}} {persistent} : !dc.shard<tensor<6x5xf32>, @world[0], local = 15> -> !dc.future<tensor<6x5xbf16>>
func.func @gather_cast_persistent(%w: !w) -> tensor<6x5xbf16> {
  %f = dc.gather_start %w {persistent} : !w -> !dc.future<tensor<6x5xbf16>>
  %full = dc.wait %f : !dc.future<tensor<6x5xbf16>>
  return %full : tensor<6x5xbf16>
}

// CHECK-LABEL: func.func @reduce_and_flush
// CHECK: %[[R:.*]]:2 = dc.reduce_scatter_start average %{{.*}}, %{{.*}} : tensor<6x5xf32>, tensor<7xf32> -> !dc.future<!dc.shard<tensor<6x5xf32>, @world[0], local = 15>>, !dc.future<!dc.shard<tensor<7xf32>, @world[0], local = 4>>
// CHECK: dc.end_backward %[[R]]#0, %[[R]]#1 : !dc.future<!dc.shard<tensor<6x5xf32>, @world[0], local = 15>>, !dc.future<!dc.shard<tensor<7xf32>, @world[0], local = 4>>
// CHECK: dc.reduce_scatter_start sum
func.func @reduce_and_flush(%gw: tensor<6x5xf32>, %gb: tensor<7xf32>) -> (!w, !b, !w) {
  %f:2 = dc.reduce_scatter_start average %gw, %gb : tensor<6x5xf32>, tensor<7xf32> -> !dc.future<!w>, !dc.future<!b>
  %s:2 = dc.end_backward %f#0, %f#1 : !dc.future<!w>, !dc.future<!b>
  %g = dc.reduce_scatter_start sum %gw : tensor<6x5xf32> -> !dc.future<!w>
  %s2 = dc.wait %g : !dc.future<!w>
  return %s#0, %s#1, %s2 : !w, !b, !w
}

// CHECK-LABEL: func.func @offload_reload
// CHECK: %[[O:.*]] = dc.offload_start %{{.*}} : tensor<4x16xf32>
// CHECK: %[[H:.*]] = dc.wait %[[O]] : !dc.future<!dc.host<tensor<4x16xf32>>>
// CHECK: %[[L:.*]] = dc.reload_start %[[H]] : !dc.host<tensor<4x16xf32>>
// CHECK: dc.wait %[[L]] : !dc.future<tensor<4x16xf32>>
func.func @offload_reload(%act: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %o = dc.offload_start %act : tensor<4x16xf32>
  %h = dc.wait %o : !dc.future<!dc.host<tensor<4x16xf32>>>
  %l = dc.reload_start %h : !dc.host<tensor<4x16xf32>>
  %back = dc.wait %l : !dc.future<tensor<4x16xf32>>
  return %back : tensor<4x16xf32>
}

// CHECK-LABEL: func.func @param_offload
// CHECK: dc.offload_start %{{.*}} : !dc.shard<tensor<6x5xf32>, @world[0], local = 15>
// CHECK: dc.reload_start %{{.*}} : !dc.host<!dc.shard<tensor<6x5xf32>, @world[0], local = 15>>
func.func @param_offload(%w: !w) -> !w {
  %o = dc.offload_start %w : !w
  %h = dc.wait %o : !dc.future<!dc.host<!w>>
  %l = dc.reload_start %h : !dc.host<!w>
  %back = dc.wait %l : !dc.future<!w>
  return %back : !w
}

// A reloaded activation and a reloaded (uploaded) parameter shard are
// released after their last uses.
// CHECK-LABEL: func.func @release_reloaded
// CHECK: %[[A:.*]] = dc.wait %{{.*}} : !dc.future<tensor<4x16xf32>>
// CHECK: %[[S:.*]] = dc.wait %{{.*}} : !dc.future<!dc.shard<tensor<6x5xf32>, @world[0], local = 15>>
// CHECK: dc.release %[[S]] : !dc.shard<tensor<6x5xf32>, @world[0], local = 15>
// CHECK: dc.release %[[A]] : tensor<4x16xf32>
func.func @release_reloaded(%h: !dc.host<tensor<4x16xf32>>, %w: !dc.host<!w>) -> (tensor<4x16xf32>, tensor<6x5xf32>) {
  %l = dc.reload_start %h : !dc.host<tensor<4x16xf32>>
  %act = dc.wait %l : !dc.future<tensor<4x16xf32>>
  %u = dc.reload_start %w : !dc.host<!w>
  %shard = dc.wait %u : !dc.future<!w>
  %g = dc.gather_start %shard : !w -> !dc.future<tensor<6x5xf32>>
  %full = dc.wait %g : !dc.future<tensor<6x5xf32>>
  dc.release %shard : !w
  %twice = arith.addf %act, %act : tensor<4x16xf32>
  dc.release %act : tensor<4x16xf32>
  return %twice, %full : tensor<4x16xf32>, tensor<6x5xf32>
}

// CHECK-LABEL: func.func @ulysses
// CHECK: dc.all_to_all %{{.*}} on @grid2d[1] split 2 concat 1 : tensor<1x512x32x64xbf16> -> tensor<1x2048x8x64xbf16>
func.func @ulysses(%x: tensor<1x512x32x64xbf16>) -> tensor<1x2048x8x64xbf16> {
  %h = dc.all_to_all %x on @grid2d[1] split 2 concat 1 : tensor<1x512x32x64xbf16> -> tensor<1x2048x8x64xbf16>
  return %h : tensor<1x2048x8x64xbf16>
}

// The asynchronous form, on tensors and on buffers.
// CHECK-LABEL: func.func @ulysses_async
// CHECK: %[[F:.*]] = dc.all_to_all_start %{{.*}} on @grid2d[1] split 2 concat 1 : tensor<1x512x32x64xbf16> -> !dc.future<tensor<1x2048x8x64xbf16>>
// CHECK: dc.wait %[[F]] : !dc.future<tensor<1x2048x8x64xbf16>>
// CHECK: dc.all_to_all_start %{{.*}} on @grid2d[1] split 2 concat 1 into %{{.*}} : memref<1x512x32x64xbf16> into memref<1x2048x8x64xbf16> -> !dc.future<memref<1x2048x8x64xbf16>>
func.func @ulysses_async(%x: tensor<1x512x32x64xbf16>, %b: memref<1x512x32x64xbf16>, %o: memref<1x2048x8x64xbf16>) -> (tensor<1x2048x8x64xbf16>, memref<1x2048x8x64xbf16>) {
  %f = dc.all_to_all_start %x on @grid2d[1] split 2 concat 1 : tensor<1x512x32x64xbf16> -> !dc.future<tensor<1x2048x8x64xbf16>>
  %h = dc.wait %f : !dc.future<tensor<1x2048x8x64xbf16>>
  %g = dc.all_to_all_start %b on @grid2d[1] split 2 concat 1 into %o : memref<1x512x32x64xbf16> into memref<1x2048x8x64xbf16> -> !dc.future<memref<1x2048x8x64xbf16>>
  %m = dc.wait %g : !dc.future<memref<1x2048x8x64xbf16>>
  return %h, %m : tensor<1x2048x8x64xbf16>, memref<1x2048x8x64xbf16>
}

// CHECK-LABEL: func.func @profiling
// CHECK: dc.invalidate_gathered %{{.*}} : !dc.shard<tensor<6x5xf32>, @world[0], local = 15>
// CHECK: dc.clear_gathered
func.func @profiling(%w: !w) {
  dc.invalidate_gathered %w : !w
  dc.clear_gathered
  return
}

// CHECK-LABEL: func.func @contract_attrs
// CHECK-SAME: -> (tensor<f32> {dc.loss}, tensor<6x5xf32> {dc.grad = #dc.grad<param = 0>})
func.func @contract_attrs(%x: tensor<f32>, %g: tensor<6x5xf32>) -> (tensor<f32> {dc.loss}, tensor<6x5xf32> {dc.grad = #dc.grad<param = 0>}) {
  return %x, %g : tensor<f32>, tensor<6x5xf32>
}

// CHECK-LABEL: func.func @replicated_grad
// CHECK: %[[A:.*]] = dc.all_reduce_start average %{{.*}} on @world[0] : tensor<7xf32>
// CHECK: dc.wait %[[A]] : !dc.future<tensor<7xf32>>
func.func @replicated_grad(%g: tensor<7xf32>) -> tensor<7xf32> {
  %f = dc.all_reduce_start average %g on @world[0] : tensor<7xf32>
  %r = dc.wait %f : !dc.future<tensor<7xf32>>
  return %r : tensor<7xf32>
}

// A shard split over axis 1 all-reduced over axis 0 (hierarchical sharding).
// CHECK-LABEL: func.func @all_reduce_shard
// CHECK: %[[A:.*]] = dc.all_reduce_start average %{{.*}} on @nodes[0] : !dc.shard<tensor<8xf32>, @nodes[1], local = 2>
// CHECK: dc.wait %[[A]] : !dc.future<!dc.shard<tensor<8xf32>, @nodes[1], local = 2>>
shard.grid @nodes(shape = 2x4)
func.func @all_reduce_shard(%s: !dc.shard<tensor<8xf32>, @nodes[1], local = 2>)
    -> !dc.shard<tensor<8xf32>, @nodes[1], local = 2> {
  %f = dc.all_reduce_start average %s on @nodes[0] : !dc.shard<tensor<8xf32>, @nodes[1], local = 2>
  %r = dc.wait %f : !dc.future<!dc.shard<tensor<8xf32>, @nodes[1], local = 2>>
  return %r : !dc.shard<tensor<8xf32>, @nodes[1], local = 2>
}

// A finite-value check of a dense buffer and of a contiguous view with an
// offset; allow_inf for an output holding infinities on purpose.
// CHECK-LABEL: func.func @check_finite
// CHECK: dc.check_finite %{{.*}}, "mul_3 at model.py:41" : memref<2x8xbf16>
// CHECK: dc.check_finite %{{.*}}, "masked_fill" allow_inf : memref<4xf32, strided<[1], offset: 4>>
func.func @check_finite(%a: memref<2x8xbf16>, %b: memref<4xf32, strided<[1], offset: 4>>) {
  dc.check_finite %a, "mul_3 at model.py:41" : memref<2x8xbf16>
  dc.check_finite %b, "masked_fill" allow_inf : memref<4xf32, strided<[1], offset: 4>>
  return
}

// CHECK-LABEL: func.func @step_arena
func.func @step_arena() -> memref<4x4xf32> {
  %c64 = arith.constant 64 : index
  // CHECK: %[[A:.*]] = dc.step_arena : memref<256xi8>
  %a = dc.step_arena : memref<256xi8>
  // CHECK: memref.view %[[A]]
  %v = memref.view %a[%c64][] : memref<256xi8> to memref<4x4xf32>
  return %v : memref<4x4xf32>
}

// A shard over every axis of a 2x4 grid: 8 ranks, 2 elements each; its
// gather and reduce-scatter run on the whole grid.
// CHECK-LABEL: func.func @shard_over_all_axes
// CHECK: dc.gather_start %{{.*}} : !dc.shard<tensor<16xf32>, @grid2d[0, 1], local = 2> -> !dc.future<tensor<16xf32>>
// CHECK: dc.reduce_scatter_start sum %{{.*}} : tensor<16xf32> -> !dc.future<!dc.shard<tensor<16xf32>, @grid2d[0, 1], local = 2>>
// CHECK: dc.gather_start %{{.*}} {axis = -1 : i64} : memref<2xf32> -> !dc.future<memref<16xf32>>
func.func @shard_over_all_axes(%w: !dc.shard<tensor<16xf32>, @grid2d[0, 1], local = 2>, %g: tensor<16xf32>, %buf: memref<2xf32>)
    -> (tensor<16xf32>, !dc.shard<tensor<16xf32>, @grid2d[0, 1], local = 2>, memref<16xf32>) {
  %f = dc.gather_start %w : !dc.shard<tensor<16xf32>, @grid2d[0, 1], local = 2> -> !dc.future<tensor<16xf32>>
  %full = dc.wait %f : !dc.future<tensor<16xf32>>
  %r = dc.reduce_scatter_start sum %g : tensor<16xf32> -> !dc.future<!dc.shard<tensor<16xf32>, @grid2d[0, 1], local = 2>>
  %s = dc.wait %r : !dc.future<!dc.shard<tensor<16xf32>, @grid2d[0, 1], local = 2>>
  %fb = dc.gather_start %buf {axis = -1 : i64} : memref<2xf32> -> !dc.future<memref<16xf32>>
  %b = dc.wait %fb : !dc.future<memref<16xf32>>
  return %full, %s, %b : tensor<16xf32>, !dc.shard<tensor<16xf32>, @grid2d[0, 1], local = 2>, memref<16xf32>
}

// Data arguments named for the artifact manifest (dc.name) beside a
// parameter (named by its #dc.param) and an unnamed data argument; the
// name is unique within each function only.
// CHECK-LABEL: func.func @named_data(
// CHECK-SAME: %arg0: tensor<4xf32> {dc.param = #dc.param<id = 0, name = "w">}
// CHECK-SAME: %arg1: tensor<2x4xi32> {dc.name = "tokens", dc.vocab = 32 : i64}
// CHECK-SAME: %arg2: tensor<2x4xi32> {dc.name = "targets"}
// CHECK-SAME: %arg3: tensor<4xf32>)
// CHECK-LABEL: func.func @named_data_again(
// CHECK-SAME: %arg0: tensor<2x4xi32> {dc.name = "tokens"})
func.func @named_data(%w: tensor<4xf32> {dc.param = #dc.param<id = 0, name = "w">},
                      %tokens: tensor<2x4xi32> {dc.vocab = 32 : i64, dc.name = "tokens"},
                      %targets: tensor<2x4xi32> {dc.name = "targets"},
                      %x: tensor<4xf32>) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}
func.func @named_data_again(%tokens: tensor<2x4xi32> {dc.name = "tokens"}) -> tensor<2x4xi32> {
  return %tokens : tensor<2x4xi32>
}

// A write-back into the caller's host buffer (optimizer state kept in host
// memory), in both forms.
// CHECK-LABEL: func.func @download
// CHECK: dc.offload_start %arg0 into %arg1 : tensor<4xf32> into !dc.host<tensor<4xf32>>
// CHECK: dc.offload_start %arg2 into %arg3 : memref<4xf32> into memref<4xf32, #dc.host_memory>
func.func @download(%v: tensor<4xf32>, %h: !dc.host<tensor<4xf32>>,
                    %vb: memref<4xf32>, %hb: memref<4xf32, #dc.host_memory>) {
  %f = dc.offload_start %v into %h : tensor<4xf32> into !dc.host<tensor<4xf32>>
  %w = dc.wait %f : !dc.future<!dc.host<tensor<4xf32>>>
  %g = dc.offload_start %vb into %hb : memref<4xf32> into memref<4xf32, #dc.host_memory>
  %x = dc.wait %g : !dc.future<memref<4xf32, #dc.host_memory>>
  return
}
