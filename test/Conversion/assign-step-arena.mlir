// RUN: dc-opt %s --split-input-file --dc-assign-step-arena | FileCheck %s

// Temporaries share bytes only when their lifetimes do not overlap: %a dies
// at the copy, so %c (made after it) reuses offset 0; %b lives across both
// and gets the next aligned offset. Largest first: %a is placed before %b.
// CHECK-LABEL: func.func @reuse
// CHECK: %[[ARENA:.*]] = dc.step_arena : memref<512xi8>
// CHECK-NOT: memref.alloc
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: memref.view %[[ARENA]][%[[C0]]][] : memref<512xi8> to memref<64xf32>
// CHECK: %[[C256:.*]] = arith.constant 256 : index
// CHECK: memref.view %[[ARENA]][%[[C256]]][] : memref<512xi8> to memref<16xf32>
// CHECK: %[[C0B:.*]] = arith.constant 0 : index
// CHECK: memref.view %[[ARENA]][%[[C0B]]][] : memref<512xi8> to memref<32xf32>
// CHECK-NOT: memref.dealloc
func.func @reuse(%x: memref<16xf32>, %out: memref<16xf32>) {
  %cst = arith.constant 1.0 : f32
  %a = memref.alloc() : memref<64xf32>
  linalg.fill ins(%cst : f32) outs(%a : memref<64xf32>)
  %b = memref.alloc() : memref<16xf32>
  %sa = memref.subview %a[0] [16] [1] : memref<64xf32> to memref<16xf32, strided<[1]>>
  memref.copy %sa, %b : memref<16xf32, strided<[1]>> to memref<16xf32>
  %c = memref.alloc() : memref<32xf32>
  linalg.fill ins(%cst : f32) outs(%c : memref<32xf32>)
  %sc = memref.subview %c[0] [16] [1] : memref<32xf32> to memref<16xf32, strided<[1]>>
  linalg.add ins(%sc, %b : memref<16xf32, strided<[1]>>, memref<16xf32>) outs(%out : memref<16xf32>)
  memref.dealloc %a : memref<64xf32>
  memref.dealloc %b : memref<16xf32>
  memref.dealloc %c : memref<32xf32>
  return
}

// -----

// A gradient read by a reduce-scatter lives until the reduction's wait
// (dc.end_backward): the buffer made after the start must not reuse it.
shard.grid @world(shape = 2)
// CHECK-LABEL: func.func @async_read
// CHECK: dc.step_arena : memref<512xi8>
// CHECK: memref.view %{{.*}}[%{{.*}}][] : memref<512xi8> to memref<8x8xf32>
// CHECK: dc.reduce_scatter_start
// CHECK: %[[C:.*]] = arith.constant 256 : index
// CHECK: memref.view %{{.*}}[%[[C]]][] : memref<512xi8> to memref<8x8xf32>
// CHECK: dc.end_backward
func.func @async_read(%out: memref<32xf32>) {
  %cst = arith.constant 1.0 : f32
  %g = memref.alloc() : memref<8x8xf32>
  linalg.fill ins(%cst : f32) outs(%g : memref<8x8xf32>)
  %f = dc.reduce_scatter_start average %g : memref<8x8xf32> -> !dc.future<memref<32xf32>>
  %t = memref.alloc() : memref<8x8xf32>
  linalg.fill ins(%cst : f32) outs(%t : memref<8x8xf32>)
  %s = dc.end_backward %f : !dc.future<memref<32xf32>>
  memref.copy %s, %out : memref<32xf32> to memref<32xf32>
  return
}

// -----

// A buffer carried through a loop is live while the loop's result is used;
// a buffer that escapes (returned) stays an allocation.
// CHECK-LABEL: func.func @loop_and_escape
// CHECK: %[[ARENA:.*]] = dc.step_arena : memref<512xi8>
// CHECK: %[[V:.*]] = memref.view %[[ARENA]]{{.*}} to memref<16xf32>
// CHECK: %[[L:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %[[V]])
// CHECK: %[[C:.*]] = arith.constant 256 : index
// CHECK: memref.view %[[ARENA]][%[[C]]][] : memref<512xi8> to memref<16xf32>
// CHECK: linalg.add ins(%[[L]],
// CHECK: %[[E:.*]] = memref.alloc() : memref<4xf32>
// CHECK: return %[[E]]
func.func @loop_and_escape(%out: memref<16xf32>) -> memref<4xf32> {
  %cst = arith.constant 1.0 : f32
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  %a = memref.alloc() : memref<16xf32>
  %l = scf.for %i = %c0 to %c2 step %c1 iter_args(%it = %a) -> (memref<16xf32>) {
    linalg.fill ins(%cst : f32) outs(%it : memref<16xf32>)
    scf.yield %it : memref<16xf32>
  }
  %b = memref.alloc() : memref<16xf32>
  linalg.fill ins(%cst : f32) outs(%b : memref<16xf32>)
  linalg.add ins(%l, %b : memref<16xf32>, memref<16xf32>) outs(%out : memref<16xf32>)
  %e = memref.alloc() : memref<4xf32>
  return %e : memref<4xf32>
}

// -----

// A reload's destination is a temporary like the others, and what its wait
// yields names the same bytes: it lives until the reloaded value's last use.
// %t, made after the wait while the reloaded value is still read, gets other
// bytes; %u, made after that use, shares the destination's.
// CHECK-LABEL: func.func @reload_destination
// CHECK: %[[ARENA:.*]] = dc.step_arena : memref<512xi8>
// CHECK: %[[C0:.*]] = arith.constant 0 : index
// CHECK: %[[D:.*]] = memref.view %[[ARENA]][%[[C0]]][] : memref<512xi8> to memref<64xf32>
// CHECK: %[[L:.*]] = dc.reload_start %{{.*}} into %[[D]]
// CHECK: %[[BACK:.*]] = dc.wait %[[L]]
// CHECK: %[[C256:.*]] = arith.constant 256 : index
// CHECK: %[[T:.*]] = memref.view %[[ARENA]][%[[C256]]][] : memref<512xi8> to memref<64xf32>
// CHECK: linalg.add ins(%[[BACK]], %[[T]] : memref<64xf32>, memref<64xf32>)
// CHECK: %[[C0B:.*]] = arith.constant 0 : index
// CHECK: memref.view %[[ARENA]][%[[C0B]]][] : memref<512xi8> to memref<64xf32>
// CHECK-NOT: memref.alloc
func.func @reload_destination(%act: memref<64xf32>, %out: memref<64xf32>) {
  %cst = arith.constant 1.0 : f32
  %o = dc.offload_start %act : memref<64xf32>
  %h = dc.wait %o : !dc.future<memref<64xf32, #dc.host_memory>>
  %d = memref.alloc() : memref<64xf32>
  %l = dc.reload_start %h into %d : memref<64xf32, #dc.host_memory> into memref<64xf32>
  %back = dc.wait %l : !dc.future<memref<64xf32>>
  %t = memref.alloc() : memref<64xf32>
  linalg.fill ins(%cst : f32) outs(%t : memref<64xf32>)
  linalg.add ins(%back, %t : memref<64xf32>, memref<64xf32>) outs(%out : memref<64xf32>)
  %u = memref.alloc() : memref<64xf32>
  linalg.fill ins(%cst : f32) outs(%u : memref<64xf32>)
  memref.copy %u, %out : memref<64xf32> to memref<64xf32>
  return
}

// -----

// A step's results (the out-parameters buffer-results-to-out-params marks
// bufferize.result) get bytes of their own from their first write to the
// end, named in the manifest (arena_offset) for the caller to pass: %grad
// (first written by its fill) reuses %a's bytes, dead by then, but not
// %b's, read after it; %loss, written last, reuses %b's (not %grad's: both
// results live to the end). The marks are removed.
// CHECK-LABEL: llvm.mlir.global internal constant @dc_manifest_json
// CHECK-SAME: \22step_arena_bytes\22:512
// CHECK-SAME: \22results\22:[{\22kind\22:\22loss\22,\22shape\22:[],\22dtype\22:\22f32\22,\22arena_offset\22:256},{\22kind\22:\22grad\22,\22param\22:0,\22shape\22:[64],\22dtype\22:\22f32\22,\22arena_offset\22:0}]
// CHECK-LABEL: func.func @step
// CHECK-SAME: (%{{.*}}: memref<16xf32>, %{{.*}}: memref<f32>, %{{.*}}: memref<64xf32>)
// CHECK-SAME: {{$}}
// CHECK: dc.step_arena : memref<512xi8>
module {
  llvm.mlir.global internal constant @dc_manifest_json("{\22abi\22:4,\22plan\22:{\22step_arena_bytes\22:0},\22steps\22:[{\22name\22:\22step\22,\22entry\22:\22dc_entry_step\22,\22args\22:[],\22results\22:[{\22kind\22:\22loss\22,\22shape\22:[],\22dtype\22:\22f32\22},{\22kind\22:\22grad\22,\22param\22:0,\22shape\22:[64],\22dtype\22:\22f32\22}]}]}\00") {addr_space = 0 : i32}
  func.func @step(%x: memref<16xf32>, %loss: memref<f32> {bufferize.result}, %grad: memref<64xf32> {bufferize.result}) {
    %cst = arith.constant 1.0 : f32
    %a = memref.alloc() : memref<64xf32>
    linalg.fill ins(%cst : f32) outs(%a : memref<64xf32>)
    %b = memref.alloc() : memref<16xf32>
    %sa = memref.subview %a[0] [16] [1] : memref<64xf32> to memref<16xf32, strided<[1]>>
    memref.copy %sa, %b : memref<16xf32, strided<[1]>> to memref<16xf32>
    linalg.fill ins(%cst : f32) outs(%grad : memref<64xf32>)
    %sg = memref.subview %grad[0] [16] [1] : memref<64xf32> to memref<16xf32, strided<[1]>>
    linalg.add ins(%sg, %b : memref<16xf32, strided<[1]>>, memref<16xf32>) outs(%x : memref<16xf32>)
    linalg.fill ins(%cst : f32) outs(%loss : memref<f32>)
    memref.dealloc %a : memref<64xf32>
    memref.dealloc %b : memref<16xf32>
    return
  }
}

