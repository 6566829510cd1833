// RUN: dc-opt %s --dc-map-to-gpu="cuda-toolkit=/cuda finishing-passes=1" | FileCheck %s
// RUN: dc-opt %s --dc-map-to-gpu=cuda-toolkit=/cuda | FileCheck %s --check-prefix=OFF
// RUN: dc-opt %s --dc-map-to-gpu="cuda-toolkit=/cuda finishing-passes=1 finishing-blocks=2" | FileCheck %s --check-prefix=BLOCKS2
// RUN: not dc-opt %s --dc-map-to-gpu="cuda-toolkit=/cuda finishing-passes=1 finishing-blocks=0" 2>&1 | FileCheck %s --check-prefix=BLOCKS0
// RUN: dc-opt %s --dc-map-to-gpu="cuda-toolkit=/cuda finishing-passes=1" --gpu-launch-sink-index-computations --gpu-kernel-outlining --dc-mark-coresident-launches --dc-merge-kernel-modules | FileCheck %s --check-prefix=OUTLINED
// RUN: dc-opt %s --dc-map-to-gpu="cuda-toolkit=/cuda folded-blocks-per-sm=4" --gpu-launch-sink-index-computations --gpu-kernel-outlining --dc-set-kernel-occupancy | FileCheck %s --check-prefix=OCCUPANCY
// RUN: not dc-opt %s --dc-map-to-gpu="cuda-toolkit=/cuda folded-blocks-per-sm=-1" 2>&1 | FileCheck %s --check-prefix=OCCUPANCY-NEGATIVE

// A norm's backward with its weight gradient's partial sums folded into
// its row group (as @norm_backward_folded in map-to-gpu.mlir) and the
// split's second pass after it (the 4 chunks' partials summed, its zero
// fill and its bf16 conversion folded into its store). With
// finishing-passes the group's kernel runs the second pass at its end
// (FinishingPass), no launch of its own. Each block, done, takes a ticket
// from the kernel's counter (a device global that only grows) after a
// GPU-scope fence; the last 4 (of 4) to take one wait, one thread polling
// until the counter reaches the launch's next multiple of 4, then fence
// again; they share the 32 column blocks of 64 columns, 4 apart from the
// block's position among them, a barrier before each.
// The counter records how many blocks wait, which must all be resident.
// CHECK: memref.global "private" @[[TICKETS:dc_finishing_tickets_[0-9]+]] : memref<1xi64> = dense<0> {dc.coresident_blocks = 4 : i64}
// CHECK-LABEL: func.func @norm_backward_finished
// CHECK-NOT: linalg.
// CHECK: gpu.launch blocks(%{{.*}}) in (%{{.*}} = %c4{{.*}}, {{.*}}) threads(%[[TID:[^,]*]], {{.*}}) in (%{{.*}} = %c128{{.*}}, {{.*}}) workgroup({{.*}}, %[[TICKET:.*]] : memref<1xi64, #gpu.address_space<workgroup>>, %[[LANES:.*]] : memref<512xf32, #gpu.address_space<workgroup>>, %[[GROUPS:.*]] : memref<128xf32, #gpu.address_space<workgroup>>)
// CHECK: memref.store %{{.*}}, %arg6[
// CHECK: %[[COUNTER:.*]] = memref.get_global @[[TICKETS]] : memref<1xi64>
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[TID]], %c0
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: scf.if %[[FIRST]] {
// CHECK-NEXT: nvvm.memory.barrier <gpu>
// CHECK: %[[MINE:.*]] = memref.atomic_rmw addi %c1_i64, %[[COUNTER]][%{{.*}}] : (i64, memref<1xi64>) -> i64
// CHECK: memref.store %[[MINE]], %[[TICKET]][
// CHECK: gpu.barrier
// CHECK: %[[T:.*]] = memref.load %[[TICKET]][
// CHECK: %[[POS:.*]] = arith.remui %[[T]], %c4_i64
// CHECK: %[[WAITS:.*]] = arith.cmpi uge, %[[POS]], %c0_i64
// CHECK: scf.if %[[WAITS]] {
// CHECK-NEXT: scf.if %[[FIRST]] {
// CHECK: %[[BASE:.*]] = arith.subi %[[T]], %[[POS]]
// CHECK: %[[ALL:.*]] = arith.addi %[[BASE]], %c4_i64
// CHECK: scf.while
// CHECK: %[[SEEN:.*]] = memref.atomic_rmw addi %c0_i64{{.*}}, %[[COUNTER]]
// CHECK: %[[MORE:.*]] = arith.cmpi ult, %[[SEEN]], %[[ALL]]
// CHECK: scf.condition(%[[MORE]])
// CHECK: nvvm.memory.barrier <gpu>
// CHECK: %[[SLICE:.*]] = arith.index_castui
// CHECK: scf.for %{{.*}} = %[[SLICE]] to %c32 step %c4
// CHECK-NEXT: gpu.barrier
// CHECK: vector.load %arg6[{{.*}}] {alignment = 16 : i64} : memref<4x2048xf32>, vector<4xf32>
// CHECK: memref.store %{{.*}}, %[[LANES]]
// CHECK: gpu.barrier
// CHECK: memref.store %{{.*}}, %[[GROUPS]]
// CHECK: gpu.barrier
// CHECK: memref.store %[[TOTAL:[^,]*]], %arg7[
// CHECK-NEXT: %[[DW16:.*]] = arith.truncf %[[TOTAL]] : f32 to bf16
// CHECK-NEXT: memref.store %[[DW16]], %arg8[
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: return
// finishing-blocks=2: the last 2 blocks wait (the count on the counter),
// and they share the 32 column blocks 2 apart.
// BLOCKS2: memref.global "private" @{{.*}} = dense<0> {dc.coresident_blocks = 2 : i64}
// BLOCKS2: %[[POS:.*]] = arith.remui %{{.*}}, %c4_i64
// BLOCKS2: arith.cmpi uge, %[[POS]], %c2_i64
// BLOCKS2: scf.for %{{.*}} = %{{.*}} to %c32 step %c2
// BLOCKS0: error: dc-map-to-gpu: finishing-blocks must be at least 1, got 0
// folded-blocks-per-sm=4: the folded row group's kernel (not the column
// reduction's second pass) asks for 4 blocks an SM once outlined; no
// marker is left in its body.
// OCCUPANCY: gpu.func @{{.*}} kernel attributes {{{.*}}nvvm.minctasm = 4 : i32
// OCCUPANCY-NOT: dc.min_blocks_per_sm
// OCCUPANCY-NOT: nvvm.minctasm
// OCCUPANCY-NEGATIVE: error: dc-map-to-gpu: folded-blocks-per-sm must be at least 0, got -1
// Without it (the default), the second pass is a kernel of its own.
// OFF-NOT: memref.global
// OFF-COUNT-2: gpu.launch blocks
// OFF-NOT: gpu.launch
// OFF-NOT: memref.atomic_rmw
// Outlining copies the counter into the kernel's module, and its launch
// carries the count (dc-mark-coresident-launches).
// OUTLINED: gpu.launch_func @norm_backward_finished_kernel::@norm_backward_finished_kernel {{.*}} {dc.coresident_blocks = 4 : i64}
// OUTLINED: gpu.module @norm_backward_finished_kernel
// OUTLINED: memref.get_global @[[TICKETS:dc_finishing_tickets_[0-9]+]]
// OUTLINED: memref.global "private" @[[TICKETS]] : memref<1xi64> = dense<0> {dc.coresident_blocks = 4 : i64}
// OUTLINED-NEXT: }
func.func @norm_backward_finished(%dy: memref<64x2048xbf16>, %x: memref<64x2048xbf16>, %r: memref<64xf32>,
                                  %w: memref<2048xbf16>, %s: memref<64xf32>, %dx: memref<64x2048xbf16>,
                                  %part: memref<4x2048xf32>, %dw: memref<2048xf32>, %dw16: memref<2048xbf16>) {
  %zero = arith.constant 0.0 : f32
  %scale = arith.constant 3.9e-03 : f32
  %dy3 = memref.expand_shape %dy [[0, 1], [2]] output_shape [4, 16, 2048] : memref<64x2048xbf16> into memref<4x16x2048xbf16>
  %x3 = memref.expand_shape %x [[0, 1], [2]] output_shape [4, 16, 2048] : memref<64x2048xbf16> into memref<4x16x2048xbf16>
  %r2 = memref.expand_shape %r [[0, 1]] output_shape [4, 16] : memref<64xf32> into memref<4x16xf32>
  linalg.fill ins(%zero : f32) outs(%part : memref<4x2048xf32>)
  linalg.generic {indexing_maps = [affine_map<(k, i, c) -> (k, i, c)>, affine_map<(k, i, c) -> (k, i, c)>,
                                   affine_map<(k, i, c) -> (k, i)>, affine_map<(k, i, c) -> (k, c)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%dy3, %x3, %r2 : memref<4x16x2048xbf16>, memref<4x16x2048xbf16>, memref<4x16xf32>) outs(%part : memref<4x2048xf32>) {
  ^bb0(%a: bf16, %b: bf16, %c: f32, %acc: f32):
    %0 = arith.extf %a : bf16 to f32
    %1 = arith.extf %b : bf16 to f32
    %2 = arith.mulf %1, %c : f32
    %3 = arith.mulf %0, %2 : f32
    %4 = arith.addf %acc, %3 : f32
    linalg.yield %4 : f32
  }
  linalg.fill ins(%zero : f32) outs(%s : memref<64xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (c)>, affine_map<(r, c) -> (r, c)>,
                                   affine_map<(r, c) -> (r)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%dy, %w, %x, %r : memref<64x2048xbf16>, memref<2048xbf16>, memref<64x2048xbf16>, memref<64xf32>) outs(%s : memref<64xf32>) {
  ^bb0(%a: bf16, %b: bf16, %c: bf16, %d: f32, %acc: f32):
    %0 = arith.extf %a : bf16 to f32
    %1 = arith.extf %b : bf16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.extf %c : bf16 to f32
    %4 = arith.mulf %3, %d : f32
    %5 = arith.mulf %2, %4 : f32
    %6 = arith.addf %acc, %5 : f32
    linalg.yield %6 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (c)>, affine_map<(r, c) -> (r, c)>,
                                   affine_map<(r, c) -> (r)>, affine_map<(r, c) -> (r)>, affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%dy, %w, %x, %r, %s : memref<64x2048xbf16>, memref<2048xbf16>, memref<64x2048xbf16>, memref<64xf32>, memref<64xf32>)
      outs(%dx : memref<64x2048xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %c: bf16, %d: f32, %e: f32, %o: bf16):
    %0 = arith.extf %a : bf16 to f32
    %1 = arith.extf %b : bf16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.extf %c : bf16 to f32
    %4 = arith.mulf %3, %d : f32
    %5 = arith.mulf %e, %scale : f32
    %6 = arith.mulf %4, %5 : f32
    %7 = arith.subf %2, %6 : f32
    %8 = arith.mulf %d, %7 : f32
    %9 = arith.truncf %8 : f32 to bf16
    linalg.yield %9 : bf16
  }
  linalg.fill ins(%zero : f32) outs(%dw : memref<2048xf32>)
  linalg.generic {indexing_maps = [affine_map<(k, c) -> (k, c)>, affine_map<(k, c) -> (c)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%part : memref<4x2048xf32>) outs(%dw : memref<2048xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %0 = arith.addf %a, %acc : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(c) -> (c)>, affine_map<(c) -> (c)>], iterator_types = ["parallel"]}
      ins(%dw : memref<2048xf32>) outs(%dw16 : memref<2048xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %0 = arith.truncf %a : f32 to bf16
    linalg.yield %0 : bf16
  }
  return
}

