// RUN: dc-opt %s --split-input-file --dc-to-dcrt --canonicalize | FileCheck %s

shard.grid @world(shape = 2)

// A group of two gathers is one dcrt_gather_start with stack arrays of the
// shards, their sizes and dtypes; the first wait of the group waits its one
// handle, every wait reads its buffer's address from the group's slots.
// CHECK-LABEL: func.func @gather_group
// CHECK-SAME: (%[[W:.*]]: memref<15xf32>, %[[B:.*]]: memref<4xf32>)
// CHECK-DAG: %[[N:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-DAG: %[[FULL_B:.*]] = llvm.mlir.constant(7 : i64) : i64
// CHECK-DAG: %[[LOCAL_B:.*]] = llvm.mlir.constant(4 : i64) : i64
// CHECK-DAG: %[[BF16:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-DAG: %[[F32:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-DAG: %[[FULL_W:.*]] = llvm.mlir.constant(30 : i64) : i64
// CHECK-DAG: %[[LOCAL_W:.*]] = llvm.mlir.constant(15 : i64) : i64
// CHECK: %[[DST:.*]] = llvm.alloca %{{.*}} x i32
// CHECK: %[[SRC:.*]] = llvm.alloca %{{.*}} x i32
// CHECK: %[[FULL:.*]] = llvm.alloca %{{.*}} x i64
// CHECK: %[[LOCAL:.*]] = llvm.alloca %{{.*}} x i64
// CHECK: %[[SHARDS:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
// CHECK: %[[OUT:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
// CHECK-DAG: %[[BD:.*]] = builtin.unrealized_conversion_cast %[[B]]
// CHECK-DAG: %[[WD:.*]] = builtin.unrealized_conversion_cast %[[W]]
// CHECK: %[[WP:.*]] = llvm.extractvalue %[[WD]][1]
// CHECK: %[[BP:.*]] = llvm.extractvalue %[[BD]][1]
// CHECK: llvm.store %[[WP]], %[[SHARDS]]
// CHECK: %[[SHARD1:.*]] = llvm.getelementptr %[[SHARDS]][1]
// CHECK: llvm.store %[[BP]], %[[SHARD1]]
// CHECK: llvm.store %[[LOCAL_W]], %[[LOCAL]]
// CHECK: llvm.store %[[LOCAL_B]]
// CHECK: llvm.store %[[FULL_W]], %[[FULL]]
// CHECK: llvm.store %[[FULL_B]]
// CHECK: llvm.store %[[F32]], %[[SRC]]
// CHECK: llvm.store %[[F32]]
// CHECK: llvm.store %[[BF16]], %[[DST]]
// CHECK: llvm.store %[[F32]]
// CHECK: %[[H:.*]] = llvm.call @dcrt_gather_start(%[[AXIS:.*]], %[[N]], %[[SHARDS]], %[[LOCAL]], %[[FULL]], %[[SRC]], %[[DST]], %[[OUT]]) : (i32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> !llvm.ptr
// CHECK: %[[SLOT1:.*]] = llvm.getelementptr %[[OUT]][1]
// CHECK: llvm.call @dcrt_wait(%[[H]])
// CHECK-NOT: llvm.call @dcrt_wait
// CHECK: %[[P0:.*]] = llvm.load %[[OUT]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[P1:.*]] = llvm.load %[[SLOT1]] : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.call @dcrt_release(%[[P0]])
// CHECK: llvm.call @dcrt_release(%[[P1]])
// CHECK: return
func.func @gather_group(%w: memref<15xf32>, %b: memref<4xf32>) {
  %f:2 = dc.gather_start %w, %b : memref<15xf32>, memref<4xf32> -> !dc.future<memref<6x5xbf16>>, !dc.future<memref<7xf32>>
  %full = dc.wait %f#0 : !dc.future<memref<6x5xbf16>>
  %bias = dc.wait %f#1 : !dc.future<memref<7xf32>>
  dc.release %full : memref<6x5xbf16>
  dc.release %bias : memref<7xf32>
  return
}

// A persistent gather is released when the step returns.
// CHECK-LABEL: func.func @persistent
// CHECK: llvm.alloca %{{.*}} x !llvm.ptr
// CHECK-NEXT: %[[OUT:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
// CHECK: %[[H:.*]] = llvm.call @dcrt_gather_start
// CHECK: llvm.call @dcrt_wait(%[[H]])
// CHECK: %[[X:.*]] = memref.load
// CHECK: %[[P:.*]] = llvm.load %[[OUT]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: llvm.call @dcrt_release(%[[P]])
// CHECK-NEXT: return %[[X]]
func.func @persistent(%b: memref<4xf32>) -> f32 {
  %p = dc.gather_start %b {persistent} : memref<4xf32> -> !dc.future<memref<7xf32>>
  %kept = dc.wait %p : !dc.future<memref<7xf32>>
  %c0 = arith.constant 0 : index
  %x = memref.load %kept[%c0] : memref<7xf32>
  return %x : f32
}

// -----

// Two buckets flushed by one end_backward: each handle is waited once.
// CHECK-LABEL: func.func @reduce_two_buckets
// CHECK-DAG: %[[AVG:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-DAG: %[[SUM:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: llvm.alloca %{{.*}} x !llvm.ptr
// CHECK-NEXT: %[[OUT1:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
// CHECK: llvm.alloca %{{.*}} x !llvm.ptr
// CHECK-NEXT: %[[OUT0:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
// CHECK: %[[H0:.*]] = llvm.call @dcrt_reduce_scatter_start(%{{.*}}, %{{.*}}, %[[AVG]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[OUT0]]) : (i32, i32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> !llvm.ptr
// CHECK: %[[SLOT:.*]] = llvm.getelementptr %[[OUT0]][1]
// CHECK: %[[H1:.*]] = llvm.call @dcrt_reduce_scatter_start(%{{.*}}, %{{.*}}, %[[SUM]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[OUT1]])
// CHECK-NEXT: llvm.call @dcrt_wait(%[[H0]])
// CHECK-NEXT: llvm.call @dcrt_wait(%[[H1]])
// CHECK-NOT: llvm.call @dcrt_wait
// CHECK: llvm.load %[[OUT0]]
// CHECK: llvm.load %[[SLOT]]
// CHECK: llvm.load %[[OUT1]]
// CHECK: return
func.func @reduce_two_buckets(%gw: memref<6x5xf32>, %gb: memref<7xf32>) -> (memref<15xf32>, memref<4xf32>, memref<4xf32>) {
  %f:2 = dc.reduce_scatter_start average %gw, %gb : memref<6x5xf32>, memref<7xf32> -> !dc.future<memref<15xf32>>, !dc.future<memref<4xf32>>
  %g = dc.reduce_scatter_start sum %gb : memref<7xf32> -> !dc.future<memref<4xf32>>
  %s:3 = dc.end_backward %f#0, %f#1, %g : !dc.future<memref<15xf32>>, !dc.future<memref<4xf32>>, !dc.future<memref<4xf32>>
  return %s#0, %s#1, %s#2 : memref<15xf32>, memref<4xf32>, memref<4xf32>
}

// -----

// The grid is gone: the runtime's communicator is the world. The dcrt
// functions are declared as they are used.
// CHECK-NOT: shard.grid
// CHECK-DAG: llvm.func @dcrt_all_reduce_start(i32, i32, !llvm.ptr, i64, i32, !llvm.ptr) -> !llvm.ptr
// CHECK-DAG: llvm.func @dcrt_wait(!llvm.ptr)
// CHECK-DAG: llvm.func @dcrt_clear_gathered()
shard.grid @world(shape = 2)

// CHECK-LABEL: func.func @all_reduce
// CHECK-DAG: %[[F32:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-DAG: %[[NUMEL:.*]] = llvm.mlir.constant(16 : i64) : i64
// CHECK-DAG: %[[AVG:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: %[[OUT:.*]] = llvm.alloca %{{.*}} x !llvm.ptr
// CHECK: %[[H:.*]] = llvm.call @dcrt_all_reduce_start(%{{.*}}, %[[AVG]], %{{.*}}, %[[NUMEL]], %[[F32]], %[[OUT]]) : (i32, i32, !llvm.ptr, i64, i32, !llvm.ptr) -> !llvm.ptr
// CHECK: llvm.call @dcrt_wait(%[[H]])
// CHECK: llvm.load %[[OUT]]
func.func @all_reduce(%g: memref<16xf32>) -> memref<16xf32> {
  %f = dc.all_reduce_start average %g on @world[0] : memref<16xf32>
  %r = dc.wait %f : !dc.future<memref<16xf32>>
  return %r : memref<16xf32>
}

// Offload and reload move bytes (4 x 16 x 4). The reload copies into its
// destination, whose address goes into the future's slot: the wait yields
// that buffer.
// CHECK-LABEL: func.func @offload_reload
// CHECK-SAME: (%{{.*}}: memref<4x16xf32>, %[[DST:.*]]: memref<4x16xf32>)
// CHECK: %[[BYTES:.*]] = llvm.mlir.constant(256 : i64) : i64
// CHECK: %[[DD:.*]] = builtin.unrealized_conversion_cast %[[DST]] : memref<4x16xf32> to !llvm.struct
// CHECK: %[[O:.*]] = llvm.call @dcrt_offload_start(%{{.*}}, %[[BYTES]], %{{.*}}) : (!llvm.ptr, i64, !llvm.ptr) -> !llvm.ptr
// CHECK: llvm.call @dcrt_wait(%[[O]])
// CHECK: %[[HOST:.*]] = llvm.load
// CHECK-NEXT: %[[DP:.*]] = llvm.extractvalue %[[DD]][1]
// CHECK-NEXT: llvm.store %[[DP]], %[[SLOT:.*]] : !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[L:.*]] = llvm.call @dcrt_reload_into(%[[HOST]], %[[BYTES]], %[[DP]]) : (!llvm.ptr, i64, !llvm.ptr) -> !llvm.ptr
// CHECK-NEXT: llvm.call @dcrt_wait(%[[L]])
// CHECK-NEXT: llvm.load %[[SLOT]] : !llvm.ptr -> !llvm.ptr
// CHECK-NOT: dcrt_release
func.func @offload_reload(%act: memref<4x16xf32>, %dst: memref<4x16xf32>) -> memref<4x16xf32> {
  %o = dc.offload_start %act : memref<4x16xf32>
  %h = dc.wait %o : !dc.future<memref<4x16xf32, #dc.host_memory>>
  %l = dc.reload_start %h into %dst : memref<4x16xf32, #dc.host_memory> into memref<4x16xf32>
  %back = dc.wait %l : !dc.future<memref<4x16xf32>>
  return %back : memref<4x16xf32>
}

// A parameter shard kept in host memory is a step argument, the caller's
// buffer: its reload is an upload (512 bytes) that leaves it alone, while an
// offloaded activation in the same step is still reloaded from the host
// pool. The argument becomes a plain host address (no #dc.host_memory).
// CHECK-LABEL: func.func @upload_param
// CHECK-SAME: (%[[W:.*]]: memref<128xf32> {dc.param = #dc.param<id = 0>}, %{{.*}}: memref<4x16xf32>, %{{.*}}: memref<128xf32>, %{{.*}}: memref<4x16xf32>)
// CHECK-DAG: %[[ACT_BYTES:.*]] = llvm.mlir.constant(256 : i64) : i64
// CHECK-DAG: %[[W_BYTES:.*]] = llvm.mlir.constant(512 : i64) : i64
// CHECK: %[[WD:.*]] = builtin.unrealized_conversion_cast %[[W]] : memref<128xf32> to !llvm.struct
// CHECK: %[[WP:.*]] = llvm.extractvalue %[[WD]][1]
// CHECK: %[[U:.*]] = llvm.call @dcrt_upload_into(%[[WP]], %[[W_BYTES]], %{{.*}}) : (!llvm.ptr, i64, !llvm.ptr) -> !llvm.ptr
// CHECK: %[[O:.*]] = llvm.call @dcrt_offload_start(%{{.*}}, %[[ACT_BYTES]], %{{.*}})
// CHECK: llvm.call @dcrt_wait(%[[O]])
// CHECK: %[[HOST:.*]] = llvm.load
// CHECK: %[[L:.*]] = llvm.call @dcrt_reload_into(%[[HOST]], %[[ACT_BYTES]], %{{.*}})
// CHECK: llvm.call @dcrt_wait(%[[U]])
// CHECK: llvm.call @dcrt_wait(%[[L]])
// CHECK-NOT: #dc.host_memory
// CHECK-NOT: dcrt_release
func.func @upload_param(%w: memref<128xf32, #dc.host_memory> {dc.param = #dc.param<id = 0>}, %act: memref<4x16xf32>, %wd: memref<128xf32>, %ad: memref<4x16xf32>) -> (memref<128xf32>, memref<4x16xf32>) {
  %u = dc.reload_start %w into %wd : memref<128xf32, #dc.host_memory> into memref<128xf32>
  %o = dc.offload_start %act : memref<4x16xf32>
  %h = dc.wait %o : !dc.future<memref<4x16xf32, #dc.host_memory>>
  %l = dc.reload_start %h into %ad : memref<4x16xf32, #dc.host_memory> into memref<4x16xf32>
  %s = dc.wait %u : !dc.future<memref<128xf32>>
  %back = dc.wait %l : !dc.future<memref<4x16xf32>>
  return %s, %back : memref<128xf32>, memref<4x16xf32>
}

// Optimizer state kept in host memory: the update is written back into
// the caller's host buffer (64 bytes), whose address the future's slot
// holds, not into the host pool.
// CHECK-LABEL: func.func @download_state
// CHECK-DAG: %[[BYTES:.*]] = llvm.mlir.constant(64 : i64) : i64
// CHECK: %[[HD:.*]] = builtin.unrealized_conversion_cast %arg1 : memref<16xf32> to !llvm.struct
// CHECK: %[[HP:.*]] = llvm.extractvalue %[[HD]][1]
// CHECK: llvm.store %[[HP]], %[[SLOT:.*]] : !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[D:.*]] = llvm.call @dcrt_download_into(%{{.*}}, %[[BYTES]], %[[HP]]) : (!llvm.ptr, i64, !llvm.ptr) -> !llvm.ptr
// CHECK: llvm.call @dcrt_wait(%[[D]])
// CHECK-NOT: dcrt_offload_start
func.func @download_state(%m: memref<16xf32>, %h: memref<16xf32, #dc.host_memory> {dc.optimizer_state = {param = 0 : i64, state = "exp_avg"}}) {
  %f = dc.offload_start %m into %h : memref<16xf32> into memref<16xf32, #dc.host_memory>
  %w = dc.wait %f : !dc.future<memref<16xf32, #dc.host_memory>>
  return
}

// The synchronous all-to-all, a start waited at once: axis 0, rank 2, shape
// [2, 8], split 1, concat 0, f32.
// CHECK-LABEL: func.func @ulysses
// CHECK-DAG: %[[F32:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-DAG: %[[CONCAT:.*]] = llvm.mlir.constant(0 : i64) : i64
// CHECK-DAG: %[[SPLIT:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-DAG: %[[RANK:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-DAG: %[[EIGHT:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK-DAG: %[[TWO:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK: %[[SHAPE:.*]] = llvm.alloca %{{.*}} x i64
// CHECK: llvm.store %[[TWO]], %[[SHAPE]]
// CHECK: llvm.store %[[EIGHT]]
// CHECK: %[[A2A:.*]] = llvm.call @dcrt_all_to_all_start(%[[F32]], %{{.*}}, %{{.*}}, %[[RANK]], %[[SHAPE]], %[[SPLIT]], %[[CONCAT]], %[[F32]]) : (i32, !llvm.ptr, !llvm.ptr, i32, !llvm.ptr, i64, i64, i32) -> !llvm.ptr
// CHECK-NEXT: llvm.call @dcrt_wait(%[[A2A]])
// CHECK: llvm.call @dcrt_invalidate_gathered(%{{.*}}) : (!llvm.ptr) -> ()
// CHECK: llvm.call @dcrt_clear_gathered() : () -> ()
func.func @ulysses(%x: memref<2x8xf32>, %y: memref<4x4xf32>, %w: memref<4xf32>) {
  dc.all_to_all %x on @world[0] split 1 concat 0 into %y : memref<2x8xf32> into memref<4x4xf32>
  dc.invalidate_gathered %w : memref<4xf32>
  dc.clear_gathered
  return
}

// -----

shard.grid @world(shape = 2)

// The asynchronous all-to-all: each start calls dcrt_all_to_all_start into
// its output, whose address the future's slot holds (as for a reload); the
// exchanges are in flight together, and each dc.wait waits its handle and
// yields the output buffer.
// CHECK-LABEL: func.func @ulysses_async
// CHECK-DAG: %[[F32:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-DAG: %[[BF16:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: %[[A:.*]] = llvm.call @dcrt_all_to_all_start(%[[F32]], %{{.*}}, %[[YP:[0-9]+]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[F32]])
// CHECK-NEXT: llvm.store %[[YP]], %[[SLOT0:.*]] : !llvm.ptr, !llvm.ptr
// CHECK-NOT: dcrt_wait
// CHECK: %[[B:.*]] = llvm.call @dcrt_all_to_all_start(%[[F32]], %{{.*}}, %[[BP:[0-9]+]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[BF16]])
// CHECK-NEXT: llvm.store %[[BP]], %[[SLOT1:.*]] : !llvm.ptr, !llvm.ptr
// CHECK-NEXT: llvm.call @dcrt_wait(%[[A]])
// CHECK-NEXT: llvm.load %[[SLOT0]] : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.call @dcrt_wait(%[[B]])
// CHECK-NEXT: llvm.load %[[SLOT1]] : !llvm.ptr -> !llvm.ptr
func.func @ulysses_async(%x: memref<2x8xf32>, %y: memref<4x4xf32>, %a: memref<2x8xbf16>, %b: memref<4x4xbf16>) -> (memref<4x4xf32>, memref<4x4xbf16>) {
  %f = dc.all_to_all_start %x on @world[0] split 1 concat 0 into %y : memref<2x8xf32> into memref<4x4xf32> -> !dc.future<memref<4x4xf32>>
  %g = dc.all_to_all_start %a on @world[0] split 1 concat 0 into %b : memref<2x8xbf16> into memref<4x4xbf16> -> !dc.future<memref<4x4xbf16>>
  %r = dc.wait %f : !dc.future<memref<4x4xf32>>
  %s = dc.wait %g : !dc.future<memref<4x4xbf16>>
  return %r, %s : memref<4x4xf32>, memref<4x4xbf16>
}

// -----

// Gathers and reduce-scatters run on their shards' axis// -----

// Gathers and reduce-scatters run on their shards' axis, which the buffer
// form keeps in `axis` (absent: axis 0).
shard.grid @dpsp(shape = 2x2)

// CHECK-LABEL: func.func @shard_axis
// CHECK-DAG: %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-DAG: %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: llvm.call @dcrt_gather_start(%[[ONE]], %[[ONE]],
// CHECK: llvm.call @dcrt_gather_start(%[[ZERO]], %[[ONE]],
// CHECK: llvm.call @dcrt_reduce_scatter_start(%[[ONE]], %[[ONE]],
func.func @shard_axis(%w: memref<3xf32>, %g: memref<6xf32>) -> memref<3xf32> {
  %f = dc.gather_start %w {axis = 1 : i64} : memref<3xf32> -> !dc.future<memref<6xf32>>
  %full = dc.wait %f : !dc.future<memref<6xf32>>
  dc.release %full : memref<6xf32>
  %f0 = dc.gather_start %w : memref<3xf32> -> !dc.future<memref<6xf32>>
  %full0 = dc.wait %f0 : !dc.future<memref<6xf32>>
  dc.release %full0 : memref<6xf32>
  %r = dc.reduce_scatter_start sum %g {axis = 1 : i64} : memref<6xf32> -> !dc.future<memref<3xf32>>
  %s = dc.wait %r : !dc.future<memref<3xf32>>
  return %s : memref<3xf32>
}

// -----

// Shards over every axis of the grid (axis = -1): the runtime's group of
// the whole grid, DCRT_ALL_AXES.
shard.grid @dpsp(shape = 2x2)

// CHECK-LABEL: func.func @all_axes
// CHECK-DAG: %[[ALL:.*]] = llvm.mlir.constant(-1 : i32) : i32
// CHECK-DAG: %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: llvm.call @dcrt_gather_start(%[[ALL]], %[[ONE]],
// CHECK: llvm.call @dcrt_reduce_scatter_start(%[[ALL]], %[[ONE]],
func.func @all_axes(%w: memref<2xf32>, %g: memref<8xf32>) -> memref<2xf32> {
  %f = dc.gather_start %w {axis = -1 : i64} : memref<2xf32> -> !dc.future<memref<8xf32>>
  %full = dc.wait %f : !dc.future<memref<8xf32>>
  dc.release %full : memref<8xf32>
  %r = dc.reduce_scatter_start sum %g {axis = -1 : i64} : memref<8xf32> -> !dc.future<memref<2xf32>>
  %s = dc.wait %r : !dc.future<memref<2xf32>>
  return %s : memref<2xf32>
}

// -----

// A rank's place in the grid (dc-ulysses' table positions): dcrt_rank,
// row-major over the grid (rank = 3 i + j on 2x3): axis 1 is rank % 3,
// axis 0 rank / 3 % 2, the linear index the rank itself.
shard.grid @g23(shape = 2x3)

// CHECK-LABEL: func.func @process_index
// CHECK: %[[R1:.*]] = llvm.call @dcrt_rank() : () -> i32
// CHECK: %[[I1:.*]] = arith.index_cast %[[R1]] : i32 to index
// CHECK: %[[A1:.*]] = arith.remui %[[I1]], %c3
// CHECK: %[[R0:.*]] = llvm.call @dcrt_rank() : () -> i32
// CHECK: %[[I0:.*]] = arith.index_cast %[[R0]] : i32 to index
// CHECK: %[[Q:.*]] = arith.divui %[[I0]], %c3
// CHECK: %[[A0:.*]] = arith.remui %[[Q]], %c2
// CHECK: %[[RL:.*]] = llvm.call @dcrt_rank() : () -> i32
// CHECK: %[[L:.*]] = arith.index_cast %[[RL]] : i32 to index
// CHECK: return %[[A1]], %[[A0]], %[[L]] : index, index, index
func.func @process_index() -> (index, index, index) {
  %j = shard.process_multi_index on @g23 axes = [1] : index
  %i = shard.process_multi_index on @g23 axes = [0] : index
  %r = shard.process_linear_index on @g23 : index
  return %j, %i, %r : index, index, index
}
