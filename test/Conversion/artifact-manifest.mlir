// RUN: dc-opt %s --split-input-file --dc-attach-target=target=cpu --dc-artifact-manifest | FileCheck %s

// A scheduled step on two ranks: one sharded parameter gathered (120 bytes
// at the peak), one data argument named by its dc.name, token ids with
// their vocabulary (dc.vocab) and no dc.name (arg<N>), the loss and the
// reduced gradient shard. The last member is the checksum that seals the
// text (dcrt.h).

// CHECK: llvm.mlir.global internal constant @dc_manifest_json("{\22abi\22:4,\22target\22:\22host\22,\22world_size\22:2,\22grid\22:\22world\22,\22plan\22:{\22gather_arena_bytes\22:120,\22host_pool_bytes\22:0,\22step_arena_bytes\22:0,\22step_buffer_bytes\22:60,\22staging_bytes\22:0},\22steps\22:[{\22name\22:\22train_step\22,\22entry\22:\22dc_entry_train_step\22,\22flops\22:0,\22args\22:[{\22kind\22:\22param\22,\22id\22:0,\22name\22:\22w\22,\22shape\22:[6,5],\22dtype\22:\22f32\22,\22local\22:15},{\22kind\22:\22data\22,\22name\22:\22x\22,\22shape\22:[3,6],\22dtype\22:\22bf16\22},{\22kind\22:\22data\22,\22name\22:\22arg2\22,\22shape\22:[4],\22dtype\22:\22i32\22,\22vocab\22:50}],\22results\22:[{\22kind\22:\22loss\22,\22shape\22:[],\22dtype\22:\22f32\22},{\22kind\22:\22grad\22,\22param\22:0,\22shape\22:[6,5],\22dtype\22:\22f32\22,\22local\22:15}],\22planned_peak_bytes\22:352}],\22checksum\22:\22{{[0-9a-f]+}}\22}\00")
// CHECK: func.func @train_step(%{{.*}}: !dc.shard<tensor<6x5xf32>, @world[0], local = 15> {bufferization.writable = false, dc.param = #dc.param<id = 0, name = "w">}, %{{.*}}: tensor<3x6xbf16> {bufferization.writable = false, dc.name = "x"}, %{{.*}}: tensor<4xi32> {bufferization.writable = false, dc.vocab = 50 : i64})
// CHECK-SAME: attributes {dc.entry = "dc_entry_train_step"}
// CHECK: llvm.func @dc_artifact_abi_version() -> i32
// CHECK-NEXT: %[[V:.*]] = llvm.mlir.constant(4 : i32) : i32
// CHECK-NEXT: llvm.return %[[V]] : i32
// CHECK: llvm.func @dc_artifact_manifest() -> !llvm.ptr
// CHECK-NEXT: llvm.mlir.addressof @dc_manifest_json : !llvm.ptr
shard.grid @world(shape = 2)
!w = !dc.shard<tensor<6x5xf32>, @world[0], local = 15>
func.func @train_step(%w: !w {dc.param = #dc.param<id = 0, name = "w">},
                      %x: tensor<3x6xbf16> {dc.name = "x"},
                      %t: tensor<4xi32> {dc.vocab = 50 : i64})
    -> (tensor<f32> {dc.loss}, !w {dc.grad = #dc.grad<param = 0>}) {
  %f = dc.gather_start %w : !w -> !dc.future<tensor<6x5xf32>>
  %full = dc.wait %f : !dc.future<tensor<6x5xf32>>
  %g = arith.addf %full, %full : tensor<6x5xf32>
  dc.release %full : tensor<6x5xf32>
  %r = dc.reduce_scatter_start average %g : tensor<6x5xf32> -> !dc.future<!w>
  %s = dc.end_backward %r : !dc.future<!w>
  %l = arith.constant dense<1.0> : tensor<f32>
  return %l, %s : tensor<f32>, !w
}

// -----

// Unscheduled: one rank, replicated parameters (no "local"); the plan is
// empty. A private function is no step.
// CHECK: @dc_manifest_json("{\22abi\22:4,\22target\22:\22host\22,\22world_size\22:1,\22grid\22:\22world\22,\22plan\22:{\22gather_arena_bytes\22:0,\22host_pool_bytes\22:0,\22step_arena_bytes\22:0,\22step_buffer_bytes\22:0,\22staging_bytes\22:0},\22steps\22:[{\22name\22:\22step\22,\22entry\22:\22dc_entry_step\22,\22flops\22:0,\22args\22:[{\22kind\22:\22param\22,\22id\22:7,\22name\22:\22arg0\22,\22shape\22:[2],\22dtype\22:\22f16\22}],\22results\22:[{\22kind\22:\22loss\22,\22shape\22:[],\22dtype\22:\22f32\22},{\22kind\22:\22grad\22,\22param\22:7,\22shape\22:[2],\22dtype\22:\22f16\22}],\22planned_peak_bytes\22:12}],\22checksum\22:\22{{[0-9a-f]+}}\22}\00")
// CHECK: func.func private @helper(%{{.*}}: tensor<2xf16>) -> tensor<2xf16> {
// CHECK: func.func @step({{.*}}) attributes {dc.entry = "dc_entry_step"}
func.func private @helper(%p: tensor<2xf16>) -> tensor<2xf16> {
  return %p : tensor<2xf16>
}
func.func @step(%p: tensor<2xf16> {dc.param = #dc.param<id = 7>})
    -> (tensor<f32> {dc.loss}, tensor<2xf16> {dc.grad = #dc.grad<param = 7>}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  %g = call @helper(%p) : (tensor<2xf16>) -> tensor<2xf16>
  return %l, %g : tensor<f32>, tensor<2xf16>
}

// -----

// Host memory: a 64-byte activation offloaded; two gathers of 16 and 32
// bytes overlap, so the arena peaks at 48. The reload is no step buffer: it
// copies into a step-arena temporary, which dc-assign-step-arena counts
// (step_arena_bytes, 0 until it runs).
// CHECK: \22plan\22:{\22gather_arena_bytes\22:48,\22host_pool_bytes\22:64,\22step_arena_bytes\22:0,\22step_buffer_bytes\22:0,\22staging_bytes\22:0}
shard.grid @world(shape = 2)
func.func @step(%a: !dc.shard<tensor<4xf32>, @world[0], local = 2> {dc.param = #dc.param<id = 0>},
                %b: !dc.shard<tensor<8xf32>, @world[0], local = 4> {dc.param = #dc.param<id = 1>},
                %x: tensor<16xf32>) -> (tensor<f32> {dc.loss}) {
  %fa = dc.gather_start %a : !dc.shard<tensor<4xf32>, @world[0], local = 2> -> !dc.future<tensor<4xf32>>
  %fb = dc.gather_start %b : !dc.shard<tensor<8xf32>, @world[0], local = 4> -> !dc.future<tensor<8xf32>>
  %wa = dc.wait %fa : !dc.future<tensor<4xf32>>
  %wb = dc.wait %fb : !dc.future<tensor<8xf32>>
  %sa = arith.addf %wa, %wa : tensor<4xf32>
  %sb = arith.addf %wb, %wb : tensor<8xf32>
  dc.release %wa : tensor<4xf32>
  dc.release %wb : tensor<8xf32>
  %act = arith.addf %x, %x : tensor<16xf32>
  %o = dc.offload_start %act : tensor<16xf32>
  %h = dc.wait %o : !dc.future<!dc.host<tensor<16xf32>>>
  %r = dc.reload_start %h : !dc.host<tensor<16xf32>>
  %back = dc.wait %r : !dc.future<tensor<16xf32>>
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Parameter shards kept in host memory (dc-offload-params) are written like
// the shards they wrap, plus "memory": "host"; the caller's host buffers are
// no part of the host pool, which holds only the 64-byte offloaded
// activation; the gathers of 16 bytes each overlap. The step buffers hold
// only the 8-byte reduced shard (the upload and the reload copy into step
// temporaries). The device-resident shard has no "memory".
// CHECK: @dc_manifest_json("{\22abi\22:4,\22target\22:\22host\22,\22world_size\22:2,\22grid\22:\22world\22,\22plan\22:{\22gather_arena_bytes\22:32,\22host_pool_bytes\22:64,\22step_arena_bytes\22:0,\22step_buffer_bytes\22:8,\22staging_bytes\22:0},\22steps\22:[{\22name\22:\22step\22,\22entry\22:\22dc_entry_step\22,\22flops\22:0,\22args\22:[{\22kind\22:\22param\22,\22id\22:0,\22name\22:\22a\22,\22shape\22:[4],\22dtype\22:\22f32\22,\22local\22:2,\22memory\22:\22host\22},{\22kind\22:\22param\22,\22id\22:1,\22name\22:\22b\22,\22shape\22:[8],\22dtype\22:\22bf16\22,\22local\22:4},{\22kind\22:\22data\22,\22name\22:\22arg2\22,\22shape\22:[16],\22dtype\22:\22f32\22}],\22results\22:[{\22kind\22:\22loss\22,\22shape\22:[],\22dtype\22:\22f32\22},{\22kind\22:\22grad\22,\22param\22:0,\22shape\22:[4],\22dtype\22:\22f32\22,\22local\22:2}],\22planned_peak_bytes\22:{{[0-9]+}}}],\22checksum\22:\22{{[0-9a-f]+}}\22}\00")
// CHECK: func.func @step(%{{.*}}: !dc.host<!dc.shard<tensor<4xf32>, @world[0], local = 2>> {bufferization.writable = false, dc.param = #dc.param<id = 0, name = "a">}
shard.grid @world(shape = 2)
!a = !dc.shard<tensor<4xf32>, @world[0], local = 2>
!b = !dc.shard<tensor<8xbf16>, @world[0], local = 4>
func.func @step(%a: !dc.host<!a> {dc.param = #dc.param<id = 0, name = "a">},
                %b: !b {dc.param = #dc.param<id = 1, name = "b">},
                %x: tensor<16xf32>)
    -> (tensor<f32> {dc.loss}, !a {dc.grad = #dc.grad<param = 0>}) {
  %ra = dc.reload_start %a : !dc.host<!a>
  %sa = dc.wait %ra : !dc.future<!a>
  %fa = dc.gather_start %sa : !a -> !dc.future<tensor<4xf32>>
  %fb = dc.gather_start %b : !b -> !dc.future<tensor<8xbf16>>
  %wa = dc.wait %fa : !dc.future<tensor<4xf32>>
  %wb = dc.wait %fb : !dc.future<tensor<8xbf16>>
  dc.release %wa : tensor<4xf32>
  dc.release %wb : tensor<8xbf16>
  %act = arith.addf %x, %x : tensor<16xf32>
  %o = dc.offload_start %act : tensor<16xf32>
  %h = dc.wait %o : !dc.future<!dc.host<tensor<16xf32>>>
  %r = dc.reload_start %h : !dc.host<tensor<16xf32>>
  %back = dc.wait %r : !dc.future<tensor<16xf32>>
  %g = dc.reduce_scatter_start average %wa : tensor<4xf32> -> !dc.future<!a>
  %s = dc.end_backward %g : !dc.future<!a>
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %s : tensor<f32>, !a
}

// -----

// Two steps (a separate forward and backward graph): two entries, one plan
// for both (the larger peak).
// CHECK: \22steps\22:[{\22name\22:\22forward\22,\22entry\22:\22dc_entry_forward\22,\22flops\22:0,{{.*}}},{\22name\22:\22backward\22,\22entry\22:\22dc_entry_backward\22,\22flops\22:0,
// CHECK: func.func @forward({{.*}}) attributes {dc.entry = "dc_entry_forward"}
// CHECK: func.func @backward({{.*}}) attributes {dc.entry = "dc_entry_backward"}
func.func @forward(%p: tensor<4xf32> {dc.param = #dc.param<id = 0>}, %x: tensor<4xf32>)
    -> (tensor<f32> {dc.loss}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}
func.func @backward(%p: tensor<4xf32> {dc.param = #dc.param<id = 0>}, %x: tensor<4xf32>)
    -> (tensor<f32> {dc.loss}, tensor<4xf32> {dc.grad = #dc.grad<param = 0>}) {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %x : tensor<f32>, tensor<4xf32>
}

// -----

// The GPU target names its lowering, for dc-run to pick the cuda backend;
// so does a module without a #dc.target (the h200 preset's).
// RUN: dc-opt %s --split-input-file --dc-attach-target=target=h200 --dc-artifact-manifest | FileCheck %s --check-prefix=H200
// RUN: dc-opt %s --split-input-file --dc-artifact-manifest | FileCheck %s --check-prefix=H200
// H200: @dc_manifest_json("{\22abi\22:4,\22target\22:\22cuda_sm90\22,
// A step compiled with finite-value checks says so, for dc-run
// --check-finite; without them the key is absent.
// RUN: dc-opt %s --split-input-file --dc-attach-target=target=h200 --dc-artifact-manifest=check-finite=true | FileCheck %s --check-prefix=CHECKED
// CHECKED: @dc_manifest_json("{\22abi\22:4,\22target\22:\22cuda_sm90\22,\22check_finite\22:true,\22world_size\22:1,
// H200-NOT: check_finite
func.func @gpu_step(%x: tensor<4xf32>) -> (tensor<f32> {dc.loss}) {
  %c = arith.constant dense<1.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

// A grid of several axes: the manifest gives its shape, and each shard its
// group (here the 3 ranks of axis 1; the 2 ranks of axis 0 hold replicas).
// The reduce-scatter stages the padding of its group of 3 (6 x 3 floats of
// 16), not of the world of 6.

// CHECK: @dc_manifest_json("{\22abi\22:4,\22target\22:\22host\22,\22world_size\22:6,\22grid\22:\22world\22,\22grid_shape\22:[2,3],\22plan\22:{{.*}}\22staging_bytes\22:72},
// CHECK-SAME: \22args\22:[{\22kind\22:\22param\22,\22id\22:0,\22name\22:\22w\22,\22shape\22:[16],\22dtype\22:\22f32\22,\22local\22:6,\22shard_axes\22:[1]}],
// CHECK-SAME: {\22kind\22:\22grad\22,\22param\22:0,\22shape\22:[16],\22dtype\22:\22f32\22,\22local\22:6,\22shard_axes\22:[1]}],\22planned_peak_bytes\22:{{[0-9]+}}}],\22checksum\22:\22{{[0-9a-f]+}}\22}\00")
shard.grid @world(shape = 2x3)
!w = !dc.shard<tensor<16xf32>, @world[1], local = 6>
func.func @train_step(%w: !w {dc.param = #dc.param<id = 0, name = "w">})
    -> (tensor<f32> {dc.loss}, !w {dc.grad = #dc.grad<param = 0>}) {
  %f = dc.gather_start %w : !w -> !dc.future<tensor<16xf32>>
  %full = dc.wait %f : !dc.future<tensor<16xf32>>
  %g = arith.addf %full, %full : tensor<16xf32>
  dc.release %full : tensor<16xf32>
  %r = dc.reduce_scatter_start average %g : tensor<16xf32> -> !dc.future<!w>
  %s = dc.end_backward %r : !dc.future<!w>
  %l = arith.constant dense<1.0> : tensor<f32>
  return %l, %s : tensor<f32>, !w
}

// -----

// All-to-alls stage twice their input on the reduce stream (packed to send,
// received) from their start to their wait: the two 64-byte exchanges in
// flight together stage 256 bytes; the later synchronous one of 32 bytes
// only 64, and the bf16 all-reduce widened to f32 (8 bytes) runs while
// nothing else is staged.
// CHECK: \22plan\22:{\22gather_arena_bytes\22:0,\22host_pool_bytes\22:0,\22step_arena_bytes\22:0,\22step_buffer_bytes\22:4,\22staging_bytes\22:256}
shard.grid @world(shape = 2)
func.func @ulysses(%q: tensor<4x4xf32>, %k: tensor<4x4xf32>, %x: tensor<2x4xf32>, %s: tensor<2xbf16>)
    -> (tensor<f32> {dc.loss}) {
  %fq = dc.all_to_all_start %q on @world[0] split 0 concat 1 : tensor<4x4xf32> -> !dc.future<tensor<2x8xf32>>
  %fk = dc.all_to_all_start %k on @world[0] split 0 concat 1 : tensor<4x4xf32> -> !dc.future<tensor<2x8xf32>>
  %a = dc.wait %fq : !dc.future<tensor<2x8xf32>>
  %b = dc.wait %fk : !dc.future<tensor<2x8xf32>>
  %y = dc.all_to_all %x on @world[0] split 1 concat 0 : tensor<2x4xf32> -> tensor<4x2xf32>
  %r = dc.all_reduce_start sum %s on @world[0] : tensor<2xbf16>
  %t = dc.wait %r : !dc.future<tensor<2xbf16>>
  %l = arith.constant dense<1.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// Token ids without dc.vocab that index a table of 13 rows: their
// vocabulary is the table's rows (dc-run's --vocab may only narrow it).
// CHECK: \22kind\22:\22data\22,\22name\22:\22tokens\22,\22shape\22:[6],\22dtype\22:\22i32\22,\22vocab\22:13}
#col = affine_map<(d0, d1) -> (d0)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @train_step(%table: tensor<13x4xf32> {dc.param = #dc.param<id = 0, name = "table">}, %tokens: tensor<6xi32> {dc.name = "tokens"}) -> (tensor<6x4xf32> {dc.loss}) {
  %init = tensor.empty() : tensor<6x4xf32>
  %rows = linalg.generic {indexing_maps = [#col, #id2], iterator_types = ["parallel", "parallel"]} ins(%tokens : tensor<6xi32>) outs(%init : tensor<6x4xf32>) {
  ^bb0(%id: i32, %out: f32):
    %row = arith.index_cast %id : i32 to index
    %col = linalg.index 1 : index
    %v = tensor.extract %table[%row, %col] : tensor<13x4xf32>
    linalg.yield %v : f32
  } -> tensor<6x4xf32>
  return %rows : tensor<6x4xf32>
}
