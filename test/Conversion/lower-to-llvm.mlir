// RUN: dc-opt %s --dc-attach-target=target=cpu --dc-lower-to-llvm | FileCheck %s

// A scheduled step, lowered whole: the step takes one pointer per argument
// and result, keeps the schedule's order of runtime calls, computes with
// loops, copies the reduced shard into the caller's result buffer, keeps its
// temporaries in the step arena (no malloc, no free) and is exported
// through its entry only.

// CHECK-NOT: memref.
// CHECK-NOT: unrealized_conversion_cast
// CHECK-NOT: shard.grid
// CHECK-NOT: @malloc
// CHECK-NOT: @free
// CHECK-LABEL: llvm.func internal @step(
// CHECK-SAME: %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr)
// CHECK: llvm.call @dcrt_step_arena()
// CHECK: llvm.call @dcrt_gather_start
// CHECK: llvm.call @dcrt_wait
// CHECK: llvm.fmul
// CHECK: llvm.call @dcrt_release
// CHECK: llvm.call @dcrt_reduce_scatter_start
// CHECK: llvm.call @dcrt_wait
// CHECK: "llvm.intr.memcpy"
// CHECK: llvm.return
// CHECK: llvm.func @dc_entry_step(%{{.*}}: !llvm.ptr)
// CHECK: llvm.call @step
// CHECK-NEXT: llvm.call @dcrt_end_step()
shard.grid @world(shape = 2)
!w = !dc.shard<tensor<8xf32>, @world[0], local = 4>
func.func @step(%w: !w {dc.param = #dc.param<id = 0, name = "w">},
                %x: tensor<8xf32>)
    -> (tensor<f32> {dc.loss}, !w {dc.grad = #dc.grad<param = 0>}) {
  %f = dc.gather_start %w : !w -> !dc.future<tensor<8xf32>>
  %full = dc.wait %f : !dc.future<tensor<8xf32>>
  %init = tensor.empty() : tensor<8xf32>
  %g = linalg.mul ins(%full, %x : tensor<8xf32>, tensor<8xf32>) outs(%init : tensor<8xf32>) -> tensor<8xf32>
  dc.release %full : tensor<8xf32>
  %r = dc.reduce_scatter_start average %g : tensor<8xf32> -> !dc.future<!w>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %l = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %s = dc.end_backward %r : !dc.future<!w>
  return %l, %s : tensor<f32>, !w
}
