// RUN: dc-opt %s --split-input-file --one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map unknown-type-conversion=identity-layout-map" | FileCheck %s

// Each dc op bufferizes to its buffer form with no copy: a shard is its local
// buffer, a future's value is the runtime's buffer, except a reload's, which
// is the destination allocated for it (a step temporary).

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<6x5xf32>, @world[0], local = 15>
!b = !dc.shard<tensor<7xf32>, @world[0], local = 4>

// CHECK-LABEL: func.func @gather_wait_release
// CHECK-SAME: (%[[W:.*]]: memref<15xf32>, %[[B:.*]]: memref<4xf32>, %[[X:.*]]: memref<6x5xf32>) -> memref<6x5xf32>
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK: %[[F:.*]]:2 = dc.gather_start %[[W]], %[[B]] : memref<15xf32>, memref<4xf32> -> !dc.future<memref<6x5xf32>>, !dc.future<memref<7xf32>>
// CHECK: %[[FULL:.*]] = dc.wait %[[F]]#0 : !dc.future<memref<6x5xf32>>
// CHECK: %[[BIAS:.*]] = dc.wait %[[F]]#1 : !dc.future<memref<7xf32>>
// CHECK: %[[OUT:.*]] = memref.alloc() {{.*}} : memref<6x5xf32>
// CHECK: linalg.add ins(%[[FULL]], %[[X]] : memref<6x5xf32>, memref<6x5xf32>) outs(%[[OUT]] : memref<6x5xf32>)
// CHECK: dc.release %[[FULL]] : memref<6x5xf32>
// CHECK: dc.release %[[BIAS]] : memref<7xf32>
// CHECK-NOT: memref.copy
// CHECK: return %[[OUT]]
func.func @gather_wait_release(%w: !w, %b: !b, %x: tensor<6x5xf32>) -> tensor<6x5xf32> {
  %f:2 = dc.gather_start %w, %b : !w, !b -> !dc.future<tensor<6x5xf32>>, !dc.future<tensor<7xf32>>
  %full = dc.wait %f#0 : !dc.future<tensor<6x5xf32>>
  %bias = dc.wait %f#1 : !dc.future<tensor<7xf32>>
  %init = tensor.empty() : tensor<6x5xf32>
  %sum = linalg.add ins(%full, %x : tensor<6x5xf32>, tensor<6x5xf32>) outs(%init : tensor<6x5xf32>) -> tensor<6x5xf32>
  dc.release %full : tensor<6x5xf32>
  dc.release %bias : tensor<7xf32>
  return %sum : tensor<6x5xf32>
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<6x5xf32>, @world[0], local = 15>

// A cast gather, persistent: its buffer is used until the end of the step.
// CHECK-LABEL: func.func @gather_cast_persistent
// CHECK: dc.gather_start %{{.*}} {persistent} : memref<15xf32> -> !dc.future<memref<6x5xbf16>>
// CHECK: dc.wait %{{.*}} : !dc.future<memref<6x5xbf16>>
// CHECK-NOT: memref.copy
func.func @gather_cast_persistent(%w: !w) -> tensor<6x5xbf16> {
  %f = dc.gather_start %w {persistent} : !w -> !dc.future<tensor<6x5xbf16>>
  %full = dc.wait %f : !dc.future<tensor<6x5xbf16>>
  %init = tensor.empty() : tensor<6x5xbf16>
  %twice = linalg.add ins(%full, %full : tensor<6x5xbf16>, tensor<6x5xbf16>) outs(%init : tensor<6x5xbf16>) -> tensor<6x5xbf16>
  return %twice : tensor<6x5xbf16>
}

// -----

shard.grid @world(shape = 2)

// An in-place write into a gathered tensor before its release would write
// the buffer the release frees: the release reads it, so the write goes to
// a new buffer.
// CHECK-LABEL: func.func @write_before_release
// CHECK: %[[FULL:.*]] = dc.wait
// CHECK: %[[OUT:.*]] = memref.alloc() {{.*}} : memref<8xf32>
// CHECK: linalg.add ins(%[[FULL]], %[[FULL]] : memref<8xf32>, memref<8xf32>) outs(%[[OUT]] : memref<8xf32>)
// CHECK: dc.release %[[FULL]]
// CHECK: return %[[OUT]]
func.func @write_before_release(%w: !dc.shard<tensor<8xf32>, @world[0], local = 4>) -> tensor<8xf32> {
  %f = dc.gather_start %w : !dc.shard<tensor<8xf32>, @world[0], local = 4> -> !dc.future<tensor<8xf32>>
  %full = dc.wait %f : !dc.future<tensor<8xf32>>
  %twice = linalg.add ins(%full, %full : tensor<8xf32>, tensor<8xf32>) outs(%full : tensor<8xf32>) -> tensor<8xf32>
  dc.release %full : tensor<8xf32>
  return %twice : tensor<8xf32>
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<6x5xf32>, @world[0], local = 15>
!b = !dc.shard<tensor<7xf32>, @world[0], local = 4>

// Reduced shards are the runtime's buffers, returned as they are.
// CHECK-LABEL: func.func @reduce_and_flush
// CHECK-SAME: (%[[GW:.*]]: memref<6x5xf32>, %[[GB:.*]]: memref<7xf32>, %[[GB2:.*]]: memref<7xf32>) -> (memref<15xf32>, memref<4xf32>, memref<4xf32>)
// CHECK-NOT: memref.copy
// CHECK: %[[F:.*]]:2 = dc.reduce_scatter_start average %[[GW]], %[[GB]] : memref<6x5xf32>, memref<7xf32> -> !dc.future<memref<15xf32>>, !dc.future<memref<4xf32>>
// CHECK: %[[G:.*]] = dc.reduce_scatter_start sum %[[GB2]] : memref<7xf32> -> !dc.future<memref<4xf32>>
// CHECK: %[[S:.*]]:2 = dc.end_backward %[[F]]#0, %[[F]]#1 : !dc.future<memref<15xf32>>, !dc.future<memref<4xf32>>
// CHECK: %[[S2:.*]] = dc.wait %[[G]] : !dc.future<memref<4xf32>>
// CHECK: return %[[S]]#0, %[[S]]#1, %[[S2]]
func.func @reduce_and_flush(%gw: tensor<6x5xf32>, %gb: tensor<7xf32>, %gb2: tensor<7xf32>) -> (!w, !b, !b) {
  %f:2 = dc.reduce_scatter_start average %gw, %gb : tensor<6x5xf32>, tensor<7xf32> -> !dc.future<!w>, !dc.future<!b>
  %g = dc.reduce_scatter_start sum %gb2 : tensor<7xf32> -> !dc.future<!b>
  %s:2 = dc.end_backward %f#0, %f#1 : !dc.future<!w>, !dc.future<!b>
  %s2 = dc.wait %g : !dc.future<!b>
  return %s#0, %s#1, %s2 : !w, !b, !b
}

// -----

shard.grid @world(shape = 2)

// The runtime reads a gradient until the wait: an op that writes the
// gradient in place afterwards must not touch that buffer, so the
// reduction gets its own copy.
// CHECK-LABEL: func.func @gradient_written_after_start
// CHECK: %[[COPY:.*]] = memref.alloc() {{.*}} : memref<8xf32>
// CHECK: memref.copy %[[G:.*]], %[[COPY]]
// CHECK: dc.reduce_scatter_start average %[[COPY]]
// CHECK: linalg.add ins(%[[G]], %[[G]] : memref<8xf32>, memref<8xf32>) outs(%[[G]] : memref<8xf32>)
func.func @gradient_written_after_start(%x: tensor<8xf32>) -> (!dc.shard<tensor<8xf32>, @world[0], local = 4>, tensor<8xf32>) {
  %init = tensor.empty() : tensor<8xf32>
  %g = linalg.add ins(%x, %x : tensor<8xf32>, tensor<8xf32>) outs(%init : tensor<8xf32>) -> tensor<8xf32>
  %f = dc.reduce_scatter_start average %g : tensor<8xf32> -> !dc.future<!dc.shard<tensor<8xf32>, @world[0], local = 4>>
  %twice = linalg.add ins(%g, %g : tensor<8xf32>, tensor<8xf32>) outs(%g : tensor<8xf32>) -> tensor<8xf32>
  %s = dc.wait %f : !dc.future<!dc.shard<tensor<8xf32>, @world[0], local = 4>>
  return %s, %twice : !dc.shard<tensor<8xf32>, @world[0], local = 4>, tensor<8xf32>
}

// -----

shard.grid @world(shape = 2)

// The runtime moves dense buffers: slices of one tensor (each expert's
// gradient in the stacked gradient of all experts) are reduced from dense
// copies, the first slice as well as the last, never as strided views
// (whose offset the runtime call would not see).
// CHECK-LABEL: func.func @slices_reduced
// CHECK-SAME: (%[[ALL:.*]]: memref<4x3xf32>)
// CHECK: %[[FIRST:.*]] = memref.subview %[[ALL]][0, 0] [1, 3] [1, 1]
// CHECK: %[[C0:.*]] = memref.alloc() {{.*}} : memref<1x3xf32>
// CHECK: memref.copy %[[FIRST]], %[[C0]]
// CHECK: %[[LAST:.*]] = memref.subview %[[ALL]][3, 0] [1, 3] [1, 1] : memref<4x3xf32> to memref<1x3xf32, strided<[3, 1], offset: 9>>
// CHECK: %[[C3:.*]] = memref.alloc() {{.*}} : memref<1x3xf32>
// CHECK: memref.copy %[[LAST]], %[[C3]]
// CHECK: dc.reduce_scatter_start average %[[C0]], %[[C3]] : memref<1x3xf32>, memref<1x3xf32>
func.func @slices_reduced(%all: tensor<4x3xf32>) -> (!dc.shard<tensor<1x3xf32>, @world[0], local = 2>, !dc.shard<tensor<1x3xf32>, @world[0], local = 2>) {
  %first = tensor.extract_slice %all[0, 0] [1, 3] [1, 1] : tensor<4x3xf32> to tensor<1x3xf32>
  %last = tensor.extract_slice %all[3, 0] [1, 3] [1, 1] : tensor<4x3xf32> to tensor<1x3xf32>
  %f:2 = dc.reduce_scatter_start average %first, %last : tensor<1x3xf32>, tensor<1x3xf32> -> !dc.future<!dc.shard<tensor<1x3xf32>, @world[0], local = 2>>, !dc.future<!dc.shard<tensor<1x3xf32>, @world[0], local = 2>>
  %s0 = dc.wait %f#0 : !dc.future<!dc.shard<tensor<1x3xf32>, @world[0], local = 2>>
  %s3 = dc.wait %f#1 : !dc.future<!dc.shard<tensor<1x3xf32>, @world[0], local = 2>>
  return %s0, %s3 : !dc.shard<tensor<1x3xf32>, @world[0], local = 2>, !dc.shard<tensor<1x3xf32>, @world[0], local = 2>
}

// -----

shard.grid @world(shape = 2)

// CHECK-LABEL: func.func @all_reduce
// CHECK-SAME: (%[[G:.*]]: memref<16xf32>) -> memref<16xf32>
// CHECK-NOT: memref.copy
// CHECK: %[[F:.*]] = dc.all_reduce_start average %[[G]] on @world[0] : memref<16xf32>
// CHECK: %[[R:.*]] = dc.wait %[[F]] : !dc.future<memref<16xf32>>
// CHECK: return %[[R]]
func.func @all_reduce(%g: tensor<16xf32>) -> tensor<16xf32> {
  %f = dc.all_reduce_start average %g on @world[0] : tensor<16xf32>
  %r = dc.wait %f : !dc.future<tensor<16xf32>>
  return %r : tensor<16xf32>
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<6x5xf32>, @world[0], local = 15>

// Host values are buffers in #dc.host_memory. The reload copies into a
// buffer allocated right before it, which its wait yields.
// CHECK-LABEL: func.func @offload_reload
// CHECK: %[[ACT:.*]] = memref.alloc() {{.*}} : memref<4x16xf32>
// CHECK-NOT: memref.copy
// CHECK: %[[O:.*]] = dc.offload_start %[[ACT]] : memref<4x16xf32>
// CHECK: %[[H:.*]] = dc.wait %[[O]] : !dc.future<memref<4x16xf32, #dc.host_memory>>
// CHECK-NEXT: %[[D:.*]] = memref.alloc() {{.*}} : memref<4x16xf32>
// CHECK-NEXT: %[[L:.*]] = dc.reload_start %[[H]] into %[[D]] : memref<4x16xf32, #dc.host_memory> into memref<4x16xf32>
// CHECK-NEXT: %[[BACK:.*]] = dc.wait %[[L]] : !dc.future<memref<4x16xf32>>
// CHECK: return %[[BACK]]
func.func @offload_reload(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %init = tensor.empty() : tensor<4x16xf32>
  %act = linalg.add ins(%x, %x : tensor<4x16xf32>, tensor<4x16xf32>) outs(%init : tensor<4x16xf32>) -> tensor<4x16xf32>
  %o = dc.offload_start %act : tensor<4x16xf32>
  %h = dc.wait %o : !dc.future<!dc.host<tensor<4x16xf32>>>
  %l = dc.reload_start %h : !dc.host<tensor<4x16xf32>>
  %back = dc.wait %l : !dc.future<tensor<4x16xf32>>
  return %back : tensor<4x16xf32>
}

// CHECK-LABEL: func.func @param_offload
// CHECK-SAME: (%[[W:.*]]: memref<15xf32>) -> memref<15xf32>
// CHECK-NOT: memref.copy
// CHECK: %[[O:.*]] = dc.offload_start %[[W]] : memref<15xf32>
// CHECK: %[[H:.*]] = dc.wait %[[O]] : !dc.future<memref<15xf32, #dc.host_memory>>
// CHECK: %[[D:.*]] = memref.alloc() {{.*}} : memref<15xf32>
// CHECK: dc.reload_start %[[H]] into %[[D]] : memref<15xf32, #dc.host_memory> into memref<15xf32>
func.func @param_offload(%w: !w) -> !w {
  %o = dc.offload_start %w : !w
  %h = dc.wait %o : !dc.future<!dc.host<!w>>
  %l = dc.reload_start %h : !dc.host<!w>
  %back = dc.wait %l : !dc.future<!w>
  return %back : !w
}

// A parameter shard kept in host memory (dc-offload-params) is an argument
// in #dc.host_memory, uploaded straight from the caller's buffer into the
// one buffer allocated for it: no copy.
// CHECK-LABEL: func.func @host_param
// CHECK-SAME: (%[[W:.*]]: memref<15xf32, #dc.host_memory> {dc.param = #dc.param<id = 0>}) -> memref<6x5xf32>
// CHECK-NOT: memref.copy
// CHECK: %[[D:.*]] = memref.alloc() {{.*}} : memref<15xf32>
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.copy
// CHECK: %[[R:.*]] = dc.reload_start %[[W]] into %[[D]] : memref<15xf32, #dc.host_memory> into memref<15xf32>
// CHECK: %[[S:.*]] = dc.wait %[[R]] : !dc.future<memref<15xf32>>
// CHECK: dc.gather_start %[[S]] : memref<15xf32> -> !dc.future<memref<6x5xf32>>
func.func @host_param(%w: !dc.host<!w> {bufferization.writable = false, dc.param = #dc.param<id = 0>}) -> tensor<6x5xf32> {
  %r = dc.reload_start %w : !dc.host<!w>
  %s = dc.wait %r : !dc.future<!w>
  %g = dc.gather_start %s : !w -> !dc.future<tensor<6x5xf32>>
  %full = dc.wait %g : !dc.future<tensor<6x5xf32>>
  return %full : tensor<6x5xf32>
}

// A reloaded activation and an uploaded shard are copied into buffers
// allocated for them (no copy after), whose lifetimes their uses end: their
// releases go. An in-place write into the reloaded tensor before its
// release goes to a new buffer.
// CHECK-LABEL: func.func @reload_release
// CHECK-SAME: (%[[H:.*]]: memref<4x16xf32, #dc.host_memory>, %[[W:.*]]: memref<15xf32, #dc.host_memory>
// CHECK-NOT: memref.copy
// CHECK: %[[DA:.*]] = memref.alloc() {{.*}} : memref<4x16xf32>
// CHECK: %[[L:.*]] = dc.reload_start %[[H]] into %[[DA]]
// CHECK: %[[BACK:.*]] = dc.wait %[[L]] : !dc.future<memref<4x16xf32>>
// CHECK: %[[DW:.*]] = memref.alloc() {{.*}} : memref<15xf32>
// CHECK: %[[R:.*]] = dc.reload_start %[[W]] into %[[DW]]
// CHECK: %[[S:.*]] = dc.wait %[[R]] : !dc.future<memref<15xf32>>
// CHECK: %[[G:.*]] = dc.gather_start %[[S]] : memref<15xf32>
// CHECK: %[[FULL:.*]] = dc.wait %[[G]]
// CHECK-NOT: dc.release
// CHECK: %[[OUT:.*]] = memref.alloc() {{.*}} : memref<4x16xf32>
// CHECK: linalg.add ins(%[[BACK]], %[[BACK]] : memref<4x16xf32>, memref<4x16xf32>) outs(%[[OUT]] : memref<4x16xf32>)
// CHECK-NOT: dc.release
// CHECK: return
func.func @reload_release(%h: !dc.host<tensor<4x16xf32>>, %w: !dc.host<!w> {bufferization.writable = false, dc.param = #dc.param<id = 0>}) -> (tensor<4x16xf32>, tensor<6x5xf32>) {
  %l = dc.reload_start %h : !dc.host<tensor<4x16xf32>>
  %back = dc.wait %l : !dc.future<tensor<4x16xf32>>
  %r = dc.reload_start %w : !dc.host<!w>
  %s = dc.wait %r : !dc.future<!w>
  %g = dc.gather_start %s : !w -> !dc.future<tensor<6x5xf32>>
  %full = dc.wait %g : !dc.future<tensor<6x5xf32>>
  dc.release %s : !w
  %twice = linalg.add ins(%back, %back : tensor<4x16xf32>, tensor<4x16xf32>) outs(%back : tensor<4x16xf32>) -> tensor<4x16xf32>
  dc.release %back : tensor<4x16xf32>
  return %twice, %full : tensor<4x16xf32>, tensor<6x5xf32>
}

// -----

shard.grid @world(shape = 4)

// The synchronous all-to-all writes into a new buffer.
// CHECK-LABEL: func.func @ulysses
// CHECK-SAME: (%[[X:.*]]: memref<1x512x32x64xbf16>) -> memref<1x2048x8x64xbf16>
// CHECK: %[[Y:.*]] = memref.alloc() {{.*}} : memref<1x2048x8x64xbf16>
// CHECK: dc.all_to_all %[[X]] on @world[0] split 2 concat 1 into %[[Y]] : memref<1x512x32x64xbf16> into memref<1x2048x8x64xbf16>
// CHECK: return %[[Y]]
func.func @ulysses(%x: tensor<1x512x32x64xbf16>) -> tensor<1x2048x8x64xbf16> {
  %h = dc.all_to_all %x on @world[0] split 2 concat 1 : tensor<1x512x32x64xbf16> -> tensor<1x2048x8x64xbf16>
  return %h : tensor<1x2048x8x64xbf16>
}

// -----

shard.grid @world(shape = 2)

// The asynchronous all-to-all exchanges into a buffer allocated for it,
// which its wait yields (no copy after). The runtime reads the input until
// the wait, so an op that writes the input in place meanwhile gets the
// exchange its own copy.
// CHECK-LABEL: func.func @ulysses_async
// CHECK-SAME: (%[[X:.*]]: memref<4x8xf32>) -> (memref<8x4xf32>, memref<4x8xf32>)
// CHECK: %[[H:.*]] = memref.alloc() {{.*}} : memref<4x8xf32>
// CHECK: linalg.add ins(%[[X]], %[[X]] : {{.*}}) outs(%[[H]] : memref<4x8xf32>)
// CHECK: %[[COPY:.*]] = memref.alloc() {{.*}} : memref<4x8xf32>
// CHECK: memref.copy %[[H]], %[[COPY]]
// CHECK: %[[Y:.*]] = memref.alloc() {{.*}} : memref<8x4xf32>
// CHECK: %[[F:.*]] = dc.all_to_all_start %[[COPY]] on @world[0] split 1 concat 0 into %[[Y]] : memref<4x8xf32> into memref<8x4xf32> -> !dc.future<memref<8x4xf32>>
// CHECK: linalg.add ins(%[[H]], %[[H]] : {{.*}}) outs(%[[H]] : memref<4x8xf32>)
// CHECK: %[[R:.*]] = dc.wait %[[F]] : !dc.future<memref<8x4xf32>>
// CHECK-NOT: memref.copy
// CHECK: return %[[R]], %[[H]]
func.func @ulysses_async(%x: tensor<4x8xf32>) -> (tensor<8x4xf32>, tensor<4x8xf32>) {
  %init = tensor.empty() : tensor<4x8xf32>
  %h = linalg.add ins(%x, %x : tensor<4x8xf32>, tensor<4x8xf32>) outs(%init : tensor<4x8xf32>) -> tensor<4x8xf32>
  %f = dc.all_to_all_start %h on @world[0] split 1 concat 0 : tensor<4x8xf32> -> !dc.future<tensor<8x4xf32>>
  %twice = linalg.add ins(%h, %h : tensor<4x8xf32>, tensor<4x8xf32>) outs(%h : tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = dc.wait %f : !dc.future<tensor<8x4xf32>>
  return %r, %twice : tensor<8x4xf32>, tensor<4x8xf32>
}

// -----

shard.grid @world(shape = 2)
!w = !dc.shard<tensor<6x5xf32>, @world[0], local = 15>

// CHECK-LABEL: func.func @profiling
// CHECK-SAME: (%[[W:.*]]: memref<15xf32>)
// CHECK: dc.invalidate_gathered %[[W]] : memref<15xf32>
// CHECK: dc.clear_gathered
func.func @profiling(%w: !w) {
  dc.invalidate_gathered %w : !w
  dc.clear_gathered
  return
}

// -----

// A memref does not say which grid axis it is split over: the buffer-form
// gather and reduce-scatter keep their shards' axis for the lowering.
shard.grid @dpsp(shape = 2x2)
!d = !dc.shard<tensor<6xf32>, @dpsp[1], local = 3>

// CHECK-LABEL: func.func @axis_of_shards
// CHECK: dc.gather_start %{{.*}} {axis = 1 : i64} : memref<3xf32> -> !dc.future<memref<6xf32>>
// CHECK: dc.reduce_scatter_start sum %{{.*}} {axis = 1 : i64} : memref<6xf32> -> !dc.future<memref<3xf32>>
func.func @axis_of_shards(%w: !d) -> !d {
  %f = dc.gather_start %w : !d -> !dc.future<tensor<6xf32>>
  %full = dc.wait %f : !dc.future<tensor<6xf32>>
  %init = tensor.empty() : tensor<6xf32>
  %g = linalg.add ins(%full, %full : tensor<6xf32>, tensor<6xf32>) outs(%init : tensor<6xf32>) -> tensor<6xf32>
  dc.release %full : tensor<6xf32>
  %r = dc.reduce_scatter_start sum %g : tensor<6xf32> -> !dc.future<!d>
  %s = dc.wait %r : !dc.future<!d>
  return %s : !d
}

// -----

// Shards over every axis of the grid: the buffer forms keep the runtime's
// group of the whole grid, axis = -1 (DCRT_ALL_AXES).
shard.grid @dpsp(shape = 2x2)
!all = !dc.shard<tensor<6xf32>, @dpsp[0, 1], local = 2>

// CHECK-LABEL: func.func @all_axes_of_shards
// CHECK: dc.gather_start %{{.*}} {axis = -1 : i64} : memref<2xf32> -> !dc.future<memref<6xf32>>
// CHECK: dc.reduce_scatter_start sum %{{.*}} {axis = -1 : i64} : memref<6xf32> -> !dc.future<memref<2xf32>>
func.func @all_axes_of_shards(%w: !all) -> !all {
  %f = dc.gather_start %w : !all -> !dc.future<tensor<6xf32>>
  %full = dc.wait %f : !dc.future<tensor<6xf32>>
  %init = tensor.empty() : tensor<6xf32>
  %g = linalg.add ins(%full, %full : tensor<6xf32>, tensor<6xf32>) outs(%init : tensor<6xf32>) -> tensor<6xf32>
  dc.release %full : tensor<6xf32>
  %r = dc.reduce_scatter_start sum %g : tensor<6xf32> -> !dc.future<!all>
  %s = dc.wait %r : !dc.future<!all>
  return %s : !all
}
