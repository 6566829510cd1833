// RUN: dc-opt %s --verify-roundtrip | FileCheck %s
// RUN: dc-opt %s --mlir-print-op-generic | dc-opt | FileCheck %s

// The buffer forms of the dc ops, as One-Shot Bufferize makes them.

shard.grid @world(shape = 2)

// CHECK-LABEL: func.func @gather
// CHECK: %[[F:.*]]:2 = dc.gather_start %{{.*}}, %{{.*}} : memref<15xf32>, memref<4xf32> -> !dc.future<memref<6x5xbf16>>, !dc.future<memref<7xf32>>
// CHECK: %[[W:.*]] = dc.wait %[[F]]#0 : !dc.future<memref<6x5xbf16>>
// CHECK: dc.release %[[W]] : memref<6x5xbf16>
// CHECK: dc.gather_start %{{.*}} {persistent} : memref<4xf32> -> !dc.future<memref<7xf32>>
func.func @gather(%w: memref<15xf32>, %b: memref<4xf32>) {
  %f:2 = dc.gather_start %w, %b : memref<15xf32>, memref<4xf32> -> !dc.future<memref<6x5xbf16>>, !dc.future<memref<7xf32>>
  %full = dc.wait %f#0 : !dc.future<memref<6x5xbf16>>
  %bias = dc.wait %f#1 : !dc.future<memref<7xf32>>
  dc.release %full : memref<6x5xbf16>
  dc.release %bias : memref<7xf32>
  %p = dc.gather_start %b {persistent} : memref<4xf32> -> !dc.future<memref<7xf32>>
  %kept = dc.wait %p : !dc.future<memref<7xf32>>
  return
}

// CHECK-LABEL: func.func @reduce
// CHECK: %[[R:.*]]:2 = dc.reduce_scatter_start average %{{.*}}, %{{.*}} : memref<6x5xf32>, memref<7xf32> -> !dc.future<memref<15xf32>>, !dc.future<memref<4xbf16>>
// CHECK: dc.end_backward %[[R]]#0, %[[R]]#1 : !dc.future<memref<15xf32>>, !dc.future<memref<4xbf16>>
// CHECK: dc.all_reduce_start sum %{{.*}} on @world[0] : memref<7xf32>
func.func @reduce(%gw: memref<6x5xf32>, %gb: memref<7xf32>) -> (memref<15xf32>, memref<4xbf16>, memref<7xf32>) {
  %f:2 = dc.reduce_scatter_start average %gw, %gb : memref<6x5xf32>, memref<7xf32> -> !dc.future<memref<15xf32>>, !dc.future<memref<4xbf16>>
  %s:2 = dc.end_backward %f#0, %f#1 : !dc.future<memref<15xf32>>, !dc.future<memref<4xbf16>>
  %a = dc.all_reduce_start sum %gb on @world[0] : memref<7xf32>
  %r = dc.wait %a : !dc.future<memref<7xf32>>
  return %s#0, %s#1, %r : memref<15xf32>, memref<4xbf16>, memref<7xf32>
}

// The reload copies into its destination, which its wait yields.
// CHECK-LABEL: func.func @offload_reload
// CHECK: %[[O:.*]] = dc.offload_start %{{.*}} : memref<4x16xf32>
// CHECK: %[[H:.*]] = dc.wait %[[O]] : !dc.future<memref<4x16xf32, #dc.host_memory>>
// CHECK: %[[L:.*]] = dc.reload_start %[[H]] into %[[D:.*]] : memref<4x16xf32, #dc.host_memory> into memref<4x16xf32>
// CHECK: dc.wait %[[L]] : !dc.future<memref<4x16xf32>>
func.func @offload_reload(%act: memref<4x16xf32>, %d: memref<4x16xf32>) -> memref<4x16xf32> {
  %o = dc.offload_start %act : memref<4x16xf32>
  %h = dc.wait %o : !dc.future<memref<4x16xf32, #dc.host_memory>>
  %l = dc.reload_start %h into %d : memref<4x16xf32, #dc.host_memory> into memref<4x16xf32>
  %back = dc.wait %l : !dc.future<memref<4x16xf32>>
  return %back : memref<4x16xf32>
}

// An uploaded shard (a step argument in host memory) likewise.
// CHECK-LABEL: func.func @upload
// CHECK: %[[U:.*]] = dc.reload_start %{{.*}} into %{{.*}} : memref<15xf32, #dc.host_memory> into memref<15xf32>
// CHECK: dc.wait %[[U]] : !dc.future<memref<15xf32>>
func.func @upload(%w: memref<15xf32, #dc.host_memory>) -> memref<15xf32> {
  %d = memref.alloc() : memref<15xf32>
  %u = dc.reload_start %w into %d : memref<15xf32, #dc.host_memory> into memref<15xf32>
  %s = dc.wait %u : !dc.future<memref<15xf32>>
  return %s : memref<15xf32>
}

// CHECK-LABEL: func.func @ulysses
// CHECK: dc.all_to_all %{{.*}} on @world[0] split 1 concat 0 into %{{.*}} : memref<2x8xf32> into memref<4x4xf32>
// CHECK: dc.invalidate_gathered %{{.*}} : memref<4xf32>
func.func @ulysses(%x: memref<2x8xf32>, %y: memref<4x4xf32>, %w: memref<4xf32>) {
  dc.all_to_all %x on @world[0] split 1 concat 0 into %y : memref<2x8xf32> into memref<4x4xf32>
  dc.invalidate_gathered %w : memref<4xf32>
  return
}
