// RUN: dc-opt %s --split-input-file --dc-map-to-gpu=cuda-toolkit=/cuda | FileCheck %s
// RUN: dc-opt %s --split-input-file --dc-map-to-gpu=cuda-toolkit=/cuda --gpu-launch-sink-index-computations --gpu-kernel-outlining --dc-merge-kernel-modules | FileCheck %s --check-prefix=OUTLINED
// RUN: not dc-opt %s --split-input-file --dc-map-to-gpu 2>&1 | FileCheck %s --check-prefix=NO-TOOLKIT
// RUN: dc-opt %s --split-input-file --dc-map-to-gpu="cuda-toolkit=/cuda single-barrier-reductions=1" | FileCheck %s --check-prefix=SINGLE

// NO-TOOLKIT: error: the GPU lowering (cuda_sm90) compiles kernels with the CUDA toolkit's ptxas, and this dc was configured without a CUDA toolkit

// One step, each kind of dispatch:
// - the zero fill of a matrix product's output folds into it (overwrite);
// - a column reduction (reduction dim first) becomes one block of 256
//   threads per 64 columns: 16 lanes of 4 neighbouring f32 columns (one
//   16-byte load per row) times 16 row lanes, each summing every 16th
//   row, four rows' loads at a time (a row past the end loads the first
//   again and adds nothing); the partials meet in shared memory, 4 groups of 4 row lanes
//   fold in order, then the first group folds the 4 groups in order and
//   folds the total into the output. Not 16-byte aligned at run time: the
//   same points, one element at a time;
// - a 0-d fill runs in one thread;
// - a scatter loop with loads and stores runs in one thread.
// CHECK-LABEL: func.func @step
// CHECK-NOT: linalg.fill
// CHECK: linalg.matmul {dc.gemm_overwrite}
// CHECK: %[[C256:c256]] = arith.constant 256 : index
// CHECK-NEXT: gpu.launch blocks({{.*}}) in ({{.*}} = %{{.*}}, {{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C256]], {{.*}}) workgroup(%[[PARTIALS:.*]] : memref<1024xf32, #gpu.address_space<workgroup>>, %[[GROUPS:.*]] : memref<256xf32, #gpu.address_space<workgroup>>)
// CHECK: %[[LANE:.*]] = arith.remui %[[TX]], %c16
// CHECK: %[[ROWLANE:.*]] = arith.divui %[[TX]], %c16
// CHECK: %[[BLOCKCOL:.*]] = arith.muli %{{.*}}, %c64
// CHECK: %[[LANECOL:.*]] = arith.muli %[[LANE]], %c4
// CHECK: %[[COL:.*]] = arith.addi %[[BLOCKCOL]], %[[LANECOL]]
// CHECK: %[[VALID:.*]] = arith.cmpi ult, %[[COL]], %c16
// CHECK: %[[ALIGNED:.*]] = arith.cmpi eq
// CHECK: %[[PARTIAL:.*]]:4 = scf.if %[[VALID]] -> (f32, f32, f32, f32)
// CHECK: scf.if %[[ALIGNED]] -> (f32, f32, f32, f32)
// CHECK: scf.for %[[ROW:.*]] = %[[ROWLANE]] to %c8{{.*}} step %c64
// CHECK: vector.load %arg0[%[[ROW]], %[[COL]]] {alignment = 16 : i64} : memref<8x16xf32>, vector<4xf32>
// CHECK: %[[NEXT:.*]] = arith.addi %[[ROW]], %c16
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[NEXT]], %c8
// CHECK: %[[AT:.*]] = arith.select %[[IN]], %[[NEXT]], %[[ROW]]
// CHECK: vector.load %arg0[%[[AT]], %[[COL]]]
// CHECK-COUNT-2: vector.load %arg0
// CHECK-NOT: vector.load
// CHECK-COUNT-4: arith.addf
// CHECK: %[[SUM:.*]] = arith.addf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT: arith.select %[[IN]], %[[SUM]], %{{.*}} : f32
// CHECK: } else {
// CHECK: scf.for %[[ROW2:.*]] = %[[ROWLANE]] to %c8{{.*}} step %c64
// CHECK-COUNT-4: memref.load %arg0[%[[ROW2]], %{{.*}}]
// CHECK: memref.store %[[PARTIAL]]#0, %[[PARTIALS]]
// CHECK: memref.store %[[PARTIAL]]#3, %[[PARTIALS]]
// CHECK-NEXT: gpu.barrier
// CHECK-COUNT-4: memref.load %[[PARTIALS]]
// CHECK: memref.store %{{.*}}, %[[GROUPS]][%[[TX]]]
// CHECK-NEXT: gpu.barrier
// CHECK: scf.if
// CHECK-COUNT-4: memref.load %[[GROUPS]]
// CHECK-NOT: memref.load %[[GROUPS]]
// CHECK: %[[OLD:.*]] = memref.load %arg3[%[[OUT:.*]]]
// CHECK: %[[NEW:.*]] = arith.addf %{{.*}}, %[[OLD]]
// CHECK: memref.store %[[NEW]], %arg3[%[[OUT]]]
// CHECK: gpu.launch
// CHECK: memref.store %{{.*}}, %arg4[] : memref<f32>
// CHECK: gpu.launch
// CHECK: scf.for
// CHECK: memref.store %{{.*}}, %arg6
// CHECK-NOT: gpu.launch
// CHECK: return
// Outlined: every kernel in one module (one ptxas run), launched from it.
// OUTLINED-COUNT-3: gpu.launch_func @step_kernel::@
// OUTLINED: gpu.module @step_kernel
// OUTLINED-COUNT-3: gpu.func @step_kernel
// OUTLINED-NOT: gpu.module @step_kernel_
func.func @step(%a: memref<8x16xf32>, %b: memref<16x4xf32>, %c: memref<8x4xf32>,
                %colsum: memref<16xf32>, %loss: memref<f32>, %idx: memref<3xi32>, %emb: memref<10x4xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<8x4xf32>)
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x4xf32>) outs(%c : memref<8x4xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (c)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%a : memref<8x16xf32>) outs(%colsum : memref<16xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  }
  linalg.fill ins(%zero : f32) outs(%loss : memref<f32>)
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  scf.for %i = %c0 to %c3 step %c1 {
    %t = memref.load %idx[%i] : memref<3xi32>
    %row = arith.index_cast %t : i32 to index
    %v = memref.load %c[%i, %c0] : memref<8x4xf32>
    memref.store %v, %emb[%row, %c0] : memref<10x4xf32>
  }
  return
}

// -----

// An elementwise op over 3 x 301 points (301 columns: no whole 16-byte
// vectors): 903 threads in 4 blocks of 256, the thread id split
// innermost-first into (row, column).
// CHECK-LABEL: func.func @elementwise
// CHECK-DAG: %[[GRID:.*]] = arith.constant 4 : index
// CHECK-DAG: %[[BLOCK:.*]] = arith.constant 256 : index
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %[[GRID]], {{.*}}) threads({{.*}}) in ({{.*}} = %[[BLOCK]],
// CHECK: arith.cmpi ult, %{{.*}}, %c903
// CHECK: arith.remui %{{.*}}, %c301
// CHECK: arith.divui %{{.*}}, %c301
// CHECK-NOT: arith.remui
// CHECK: math.exp
// CHECK-NOT: vector.
func.func @elementwise(%x: memref<3x301xf32>, %y: memref<3x301xf32>) {
  linalg.exp ins(%x : memref<3x301xf32>) outs(%y : memref<3x301xf32>)
  return
}

// -----

// Vectorized elementwise: y = silu(g) * u * s[row] on 4 x 64 bf16 (and an
// f32 broadcast per row), 8 bf16 (16 bytes) per thread: 32 threads. The
// contiguous operands are read and written with 16-byte vector accesses
// when every buffer is 16-byte aligned at run time, else the same 8 points
// one at a time; the per-row scale is one scalar load. A fill of 4 x 64
// f32 takes 4 per thread.
// CHECK-LABEL: func.func @vectorized
// CHECK: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c32{{.*}},
// CHECK: %[[ID:.*]] = arith.addi
// CHECK-NOT: scf.if
// CHECK: %[[COL8:.*]] = arith.remui %[[ID]], %c8
// CHECK: %[[ROW:.*]] = arith.divui %[[ID]], %c8
// CHECK: %[[COL:.*]] = arith.muli %[[COL8]], %c8
// CHECK: memref.extract_aligned_pointer_as_index %arg0
// CHECK: memref.extract_aligned_pointer_as_index %arg1
// CHECK: memref.extract_aligned_pointer_as_index %arg3
// CHECK: %[[ALIGNED:.*]] = arith.andi
// CHECK: scf.if %[[ALIGNED]] {
// CHECK: %[[G:.*]] = vector.load %arg0[%[[ROW]], %[[COL]]] {alignment = 16 : i64} : memref<4x64xbf16>, vector<8xbf16>
// CHECK: %[[U:.*]] = vector.load %arg1[%[[ROW]], %[[COL]]] {alignment = 16 : i64} : memref<4x64xbf16>, vector<8xbf16>
// CHECK: %[[S:.*]] = memref.load %arg2[%[[ROW]]] : memref<4xf32>
// CHECK-COUNT-8: math.exp
// CHECK: %[[Y:.*]] = vector.from_elements {{.*}} : vector<8xbf16>
// CHECK: vector.store %[[Y]], %arg3[%[[ROW]], %[[COL]]] {alignment = 16 : i64}
// CHECK: } else {
// CHECK-COUNT-8: memref.store {{.*}}, %arg3
// CHECK: }
// CHECK: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c64{{.*}},
// CHECK: vector.from_elements %cst{{.*}}, %cst{{.*}}, %cst{{.*}}, %cst{{.*}} : vector<4xf32>
// CHECK: vector.store {{.*}}, %arg4
func.func @vectorized(%g: memref<4x64xbf16>, %u: memref<4x64xbf16>, %s: memref<4xf32>,
                      %y: memref<4x64xbf16>, %z: memref<4x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r, c)>,
                                   affine_map<(r, c) -> (r)>, affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%g, %u, %s : memref<4x64xbf16>, memref<4x64xbf16>, memref<4xf32>)
      outs(%y : memref<4x64xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %scale: f32, %out: bf16):
    %af = arith.extf %a : bf16 to f32
    %bf = arith.extf %b : bf16 to f32
    %neg = arith.negf %af : f32
    %e = math.exp %neg : f32
    %one = arith.constant 1.0 : f32
    %d = arith.addf %one, %e : f32
    %silu = arith.divf %af, %d : f32
    %p = arith.mulf %silu, %bf : f32
    %q = arith.mulf %p, %scale : f32
    %r = arith.truncf %q : f32 to bf16
    linalg.yield %r : bf16
  }
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%z : memref<4x64xf32>)
  return
}

// -----

// A rotary embedding on [rows, 2, 8] bf16 halves: each element reads its
// partner in the other half at 1 - j (not a projected permutation), and
// the cos table by (row, i). The loop over the halves is not spread over
// threads: a thread takes both halves of its row's column group, loading
// each half once (as its element for one and its partner for the other)
// and the cos table once, then storing both halves. Its scalar path reads
// the partner at the computed 1 - j. An output whose map is not a
// projected permutation would not vectorize.
// CHECK-LABEL: func.func @rotary_partner
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c1{{.*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c4{{.*}},
// CHECK: %[[ROW:.*]] = arith.addi
// CHECK: %[[I:.*]] = arith.muli
// CHECK: scf.if
// CHECK: vector.load %arg0[%[[ROW]], %[[H0:c0.*]], %[[I]]] {alignment = 16 : i64} : memref<4x2x8xbf16>, vector<8xbf16>
// CHECK: vector.load %arg0[%[[ROW]], %[[H1:c1.*]], %[[I]]] {alignment = 16 : i64} : memref<4x2x8xbf16>, vector<8xbf16>
// CHECK: vector.load %arg1[%[[ROW]], %[[I]]] {alignment = 16 : i64} : memref<4x8xf32>, vector<8xf32>
// CHECK-NOT: vector.load
// CHECK: vector.store {{.*}}, %arg2[%[[ROW]], %{{c0.*}}, %[[I]]]
// CHECK-NOT: vector.load
// CHECK: vector.store {{.*}}, %arg2[%[[ROW]], %{{c1.*}}, %[[I]]]
// CHECK: } else {
// CHECK: %[[NEG:.*]] = arith.muli %{{c0.*}}, %c-1
// CHECK: %[[PARTNER:.*]] = arith.addi %[[NEG]], %c1
// CHECK: memref.load %arg0[%[[ROW]], %[[PARTNER]], %[[I]]]
// CHECK-LABEL: func.func @not_vector_output
// CHECK-NOT: vector.store
// CHECK: return
func.func @rotary_partner(%x: memref<4x2x8xbf16>, %cos: memref<4x8xf32>, %y: memref<4x2x8xbf16>) {
  linalg.generic {indexing_maps = [affine_map<(r, j, i) -> (r, j, i)>, affine_map<(r, j, i) -> (r, 1 - j, i)>,
                                   affine_map<(r, j, i) -> (r, i)>, affine_map<(r, j, i) -> (r, j, i)>],
                  iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x, %x, %cos : memref<4x2x8xbf16>, memref<4x2x8xbf16>, memref<4x8xf32>)
      outs(%y : memref<4x2x8xbf16>) {
  ^bb0(%a: bf16, %p: bf16, %c: f32, %out: bf16):
    %af = arith.extf %a : bf16 to f32
    %pf = arith.extf %p : bf16 to f32
    %t = arith.mulf %af, %c : f32
    %s = arith.subf %t, %pf : f32
    %r = arith.truncf %s : f32 to bf16
    linalg.yield %r : bf16
  }
  return
}
func.func @not_vector_output(%x: memref<4x2x8xbf16>, %y: memref<4x2x8xbf16>) {
  linalg.generic {indexing_maps = [affine_map<(r, j, i) -> (r, j, i)>, affine_map<(r, j, i) -> (r, 1 - j, i)>],
                  iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : memref<4x2x8xbf16>) outs(%y : memref<4x2x8xbf16>) {
  ^bb0(%a: bf16, %out: bf16):
    linalg.yield %a : bf16
  }
  return
}

// -----

// A thread takes several groups when that puts more loads in flight: one
// vector operand over 8 x 1000 bf16s is 1000 groups of 8; 256 threads
// take 2 groups each, 256 apart (a warp's accesses stay contiguous), in 2
// blocks of 512 groups. Both loads come before the math; the second group
// of the last threads lies past the end: its load reads the last group
// (clamped to 999) and it stores nothing.
// CHECK-LABEL: func.func @groups_per_thread
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c2{{.*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c256{{.*}},
// CHECK: %[[BASE:.*]] = arith.addi
// CHECK: %[[FIRST:.*]] = arith.cmpi ult, %[[BASE]], %c1000
// CHECK: arith.minui %[[BASE]], %c999
// CHECK: %[[NEXT:.*]] = arith.addi %[[BASE]], %c256
// CHECK: %[[SECOND:.*]] = arith.cmpi ult, %[[NEXT]], %c1000
// CHECK: arith.minui %[[NEXT]], %c999
// CHECK: scf.if
// CHECK: vector.load %arg0
// CHECK: vector.load %arg0
// CHECK-NOT: vector.load
// CHECK: math.exp
// CHECK: scf.if %[[FIRST]] {
// CHECK: vector.store
// CHECK: math.exp
// CHECK: scf.if %[[SECOND]] {
// CHECK: vector.store
// CHECK: } else {
// CHECK: scf.if %[[FIRST]] {
// CHECK-COUNT-8: memref.store
// CHECK: scf.if %[[SECOND]] {
// CHECK-COUNT-8: memref.store
func.func @groups_per_thread(%x: memref<8x1000xbf16>, %y: memref<8x1000xbf16>) {
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<8x1000xbf16>) outs(%y : memref<8x1000xbf16>) {
  ^bb0(%a: bf16, %out: bf16):
    %e = math.exp %a : bf16
    linalg.yield %e : bf16
  }
  return
}

// -----

// Two vector operands already put 2 loads in flight with one group each:
// the 1000 groups take 4 blocks of 256 threads, one group a thread (more
// groups a thread made fewer, longer blocks, and SwiGLU's forward 2%
// slower on an H100).
// CHECK-LABEL: func.func @one_group_of_two_inputs
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %c4{{.*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c256{{.*}},
// CHECK: %[[BASE:.*]] = arith.addi
// CHECK-NOT: arith.addi %[[BASE]], %c256
// CHECK: vector.load %arg0
// CHECK: vector.load %arg1
// CHECK-NOT: vector.load
// CHECK: vector.store
// CHECK-NOT: vector.store
// CHECK: } else {
func.func @one_group_of_two_inputs(%x: memref<8x1000xbf16>, %g: memref<8x1000xbf16>, %y: memref<8x1000xbf16>) {
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %g : memref<8x1000xbf16>, memref<8x1000xbf16>) outs(%y : memref<8x1000xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %out: bf16):
    %m = arith.mulf %a, %b : bf16
    linalg.yield %m : bf16
  }
  return
}

// -----

// Row reductions, one block per row. The row max of 6 x 1001 scores: 6
// blocks of 256 threads, each thread folds every 256th element from -inf,
// gpu.all_reduce takes the block's max, thread 0 folds it into the output.
// Then the sum of exp(x - max), with the row's max read per element
// (a broadcast input), over rows of 41: two warps per row. No 16-byte
// access divides rows of 1001 or 41 f32s: one element at a time.
// CHECK-LABEL: func.func @rows
// CHECK-DAG: %[[ROWS:.*]] = arith.constant 6 : index
// CHECK-DAG: %[[T256:.*]] = arith.constant 256 : index
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in ({{.*}} = %[[ROWS]], {{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in ({{.*}} = %[[T256]],
// CHECK: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[PART:.*]] = scf.for %[[I:.*]] = %[[TX]] to %c1001{{.*}} step %c256{{.*}} iter_args(%[[ACC:.*]] = %[[NEGINF]])
// CHECK: %[[X:.*]] = memref.load %arg0[%[[BX]], %[[I]]]
// CHECK: arith.maximumf %[[ACC]], %[[X]]
// CHECK: %[[MAX:.*]] = gpu.all_reduce maximumf %[[PART]] uniform
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[TX]], %c0
// CHECK: scf.if %[[FIRST]]
// CHECK: %[[OLD:.*]] = memref.load %arg1[%[[BX]]]
// CHECK: %[[NEW:.*]] = arith.maximumf %[[OLD]], %[[MAX]]
// CHECK: memref.store %[[NEW]], %arg1[%[[BX]]]
// CHECK: gpu.terminator
// CHECK: %[[T64:.*]] = arith.constant 64 : index
// CHECK: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %[[T64]],
// CHECK: scf.for
// CHECK-DAG: memref.load %arg2
// CHECK-DAG: memref.load %arg3
// CHECK: arith.subf
// CHECK: math.exp
// CHECK: arith.addf
// CHECK: gpu.all_reduce add
func.func @rows(%x: memref<6x1001xf32>, %max: memref<6xf32>,
                %y: memref<5x41xf32>, %ymax: memref<5xf32>, %sum: memref<5xf32>) {
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<6x1001xf32>) outs(%max : memref<6xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %acc, %in : f32
    linalg.yield %m : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>,
                                   affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%y, %ymax : memref<5x41xf32>, memref<5xf32>) outs(%sum : memref<5xf32>) {
  ^bb0(%in: f32, %m: f32, %acc: f32):
    %d = arith.subf %in, %m : f32
    %e = math.exp %d : f32
    %s = arith.addf %acc, %e : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A row reduction with its neighbours on the same rows is one kernel
// (RMSNorm's forward): the zero fill of the sums, the sum of squares, the
// rsqrt of each row's sum, then the scale of every element of the row.
// Rows of 512 bf16s: 32 lanes of 8 neighbours (one 16-byte load of each
// operand along the row) cover a row in 2 steps, so a warp takes each row,
// 8 rows per block of 256 threads, with no loop: the lanes fold their
// points, a butterfly of xor shuffles gives every lane the row's sum,
// every lane computes the per-row values itself (lane 0 stores them) and
// the scale reuses the row the sum of squares loaded and the rsqrt
// computed (kept in registers, not read again). Every row operand that no
// member writes (x, and the weight the scale reads after the sums) is
// loaded first, so no load waits behind the reduction. Warp barriers
// between the members. When a buffer is not 16-byte aligned, the same
// group reads the same points one at a time, in the same order.
// CHECK-LABEL: func.func @norm
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in ({{.*}} = %c1{{.*}}, {{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in ({{.*}} = %c256{{.*}},
// CHECK: %[[WARP:.*]] = arith.divui %[[TX]], %c32
// CHECK: %[[R0:.*]] = arith.muli %[[BX]], %c8
// CHECK: %[[ROW:.*]] = arith.addi %[[R0]], %[[WARP]]
// CHECK: %[[LANE:.*]] = arith.remui %[[TX]], %c32
// CHECK-NOT: scf.if
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[LANE]], %c0
// Alignment of x, w and y (each once).
// CHECK-COUNT-3: memref.extract_aligned_pointer_as_index
// CHECK-NOT: memref.extract_aligned_pointer_as_index
// CHECK: %[[ALIGNED:.*]] = arith.andi
// CHECK: scf.if %[[ALIGNED]] {
// CHECK: %[[P:.*]] = arith.muli %[[LANE]], %c8
// CHECK: %[[P2:.*]] = arith.addi %[[P]], %c256
// CHECK-NOT: scf.if
// CHECK: %[[X:.*]] = vector.load %arg0[%[[ROW]], %[[P]]] {alignment = 16 : i64} : memref<8x512xbf16>, vector<8xbf16>
// CHECK-NEXT: %[[X2:.*]] = vector.load %arg0[%[[ROW]], %[[P2]]] {alignment = 16 : i64}
// CHECK-NEXT: %[[W:.*]] = vector.load %arg1[%[[P]]] {alignment = 16 : i64}
// CHECK-NEXT: %[[W2:.*]] = vector.load %arg1[%[[P2]]] {alignment = 16 : i64}
// CHECK: scf.if %[[FIRST]]
// CHECK-NEXT: memref.store %[[ZERO:.*]], %arg2[%[[ROW]]]
// CHECK: nvvm.bar.warp.sync
// CHECK-NOT: scf.for
// CHECK-NOT: vector.load
// CHECK: vector.extract %[[X]][0]
// CHECK: vector.extract %[[X]][7]
// CHECK: vector.extract %[[X2]][0]
// CHECK: %[[S16:[[:alnum:]_]+]], %{{.*}} = gpu.shuffle xor %[[PART:[[:alnum:]_]+]], %c16
// CHECK-NEXT: arith.addf %[[PART]], %[[S16]]
// CHECK: gpu.shuffle xor %{{.*}}, %c8
// CHECK: gpu.shuffle xor %{{.*}}, %c4
// CHECK: gpu.shuffle xor %{{.*}}, %c2
// CHECK: %[[S1:[[:alnum:]_]+]], %{{.*}} = gpu.shuffle xor %[[P1:[[:alnum:]_]+]], %c1
// CHECK-NEXT: %[[TOTAL:.*]] = arith.addf %[[P1]], %[[S1]]
// CHECK-NOT: gpu.all_reduce
// CHECK-NOT: memref.load
// CHECK: %[[SUM:.*]] = arith.addf %[[ZERO]], %[[TOTAL]]
// CHECK: scf.if %[[FIRST]]
// CHECK-NEXT: memref.store %[[SUM]], %arg2[%[[ROW]]]
// CHECK: nvvm.bar.warp.sync
// CHECK-NOT: memref.load
// CHECK: %[[RSTD:.*]] = math.rsqrt
// CHECK: scf.if %[[FIRST]]
// CHECK-NEXT: memref.store %[[RSTD]], %arg3[%[[ROW]]]
// CHECK: nvvm.bar.warp.sync
// CHECK-NOT: memref.load
// CHECK-NOT: vector.load
// CHECK: vector.extract %[[W]][0]
// CHECK: arith.mulf %{{.*}}, %[[RSTD]]
// CHECK: %[[Y:.*]] = vector.from_elements {{.*}} : vector<8xbf16>
// CHECK: vector.store %[[Y]], %arg4[%[[ROW]], %[[P]]] {alignment = 16 : i64}
// CHECK-NOT: memref.load
// CHECK-NOT: vector.load
// CHECK: vector.extract %[[W2]][0]
// CHECK: vector.store %{{.*}}, %arg4[%[[ROW]], %[[P2]]] {alignment = 16 : i64}
// CHECK: } else {
// CHECK-NOT: vector.load
// CHECK-COUNT-16: memref.load %arg0[%[[ROW]], %{{.*}}]
// CHECK: gpu.shuffle xor
// CHECK: math.rsqrt
// CHECK-NOT: memref.load %arg0
// CHECK-COUNT-16: memref.store %{{.*}}, %arg4[%[[ROW]], %{{.*}}]
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @norm(%x: memref<8x512xbf16>, %w: memref<512xbf16>, %ss: memref<8xf32>,
                %rstd: memref<8xf32>, %y: memref<8x512xbf16>) {
  %zero = arith.constant 0.0 : f32
  %inv = arith.constant 0.001953125 : f32
  %eps = arith.constant 1.0e-5 : f32
  linalg.fill ins(%zero : f32) outs(%ss : memref<8xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x512xbf16>) outs(%ss : memref<8xf32>) {
  ^bb0(%in: bf16, %acc: f32):
    %f = arith.extf %in : bf16 to f32
    %sq = arith.mulf %f, %f : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r) -> (r)>, affine_map<(r) -> (r)>],
                  iterator_types = ["parallel"]}
      ins(%ss : memref<8xf32>) outs(%rstd : memref<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %inv : f32
    %a = arith.addf %m, %eps : f32
    %r = math.rsqrt %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>,
                                   affine_map<(r, c) -> (c)>, affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %rstd, %w : memref<8x512xbf16>, memref<8xf32>, memref<512xbf16>) outs(%y : memref<8x512xbf16>) {
  ^bb0(%in: bf16, %r: f32, %g: bf16, %out: bf16):
    %f = arith.extf %in : bf16 to f32
    %n = arith.mulf %f, %r : f32
    %gf = arith.extf %g : bf16 to f32
    %o = arith.mulf %n, %gf : f32
    %t = arith.truncf %o : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// Not one kernel: the op after the row reduction reads the sums across
// rows (a transposed broadcast: row r reads sum[c]), which another block
// writes. Each stays its own kernel.
// CHECK-LABEL: func.func @not_row_local
// CHECK-COUNT-2: gpu.launch
// CHECK-NOT: gpu.barrier
// CHECK: return
func.func @not_row_local(%x: memref<8x8xf32>, %sums: memref<8xf32>, %y: memref<8x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x8xf32>) outs(%sums : memref<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %acc, %in : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (c)>,
                                   affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %sums : memref<8x8xf32>, memref<8xf32>) outs(%y : memref<8x8xf32>) {
  ^bb0(%in: f32, %s: f32, %out: f32):
    %d = arith.divf %in, %s : f32
    linalg.yield %d : f32
  }
  return
}

// -----

// A batched product written as a linalg.generic (bf16 operands widened to
// an f32 accumulator, k^T as a map) is a library product: it stays on the
// host for dc-to-dcrt. The same product with operands of two element types
// (f32 x bf16) is not, and becomes a kernel.
// CHECK-LABEL: func.func @contractions
// CHECK: linalg.generic
// CHECK-SAME: ins(%arg0, %arg1 : memref<4x8x16xbf16>, memref<4x8x16xbf16>) outs(%arg2 : memref<4x8x8xf32>)
// CHECK-NOT: linalg.generic
// CHECK: gpu.launch
// CHECK: memref.load %arg3
// CHECK: memref.load %arg1
func.func @contractions(%q: memref<4x8x16xbf16>, %k: memref<4x8x16xbf16>, %s: memref<4x8x8xf32>,
                        %p: memref<4x8x8xf32>, %o: memref<4x8x16xf32>) {
  linalg.generic {indexing_maps = [affine_map<(b, i, j, d) -> (b, i, d)>,
                                   affine_map<(b, i, j, d) -> (b, j, d)>,
                                   affine_map<(b, i, j, d) -> (b, i, j)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<4x8x16xbf16>, memref<4x8x16xbf16>) outs(%s : memref<4x8x8xf32>) {
  ^bb0(%a: bf16, %b: bf16, %acc: f32):
    %ea = arith.extf %a : bf16 to f32
    %eb = arith.extf %b : bf16 to f32
    %m = arith.mulf %ea, %eb : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(b, i, d, j) -> (b, i, j)>,
                                   affine_map<(b, i, d, j) -> (b, j, d)>,
                                   affine_map<(b, i, d, j) -> (b, i, d)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%p, %k : memref<4x8x8xf32>, memref<4x8x16xbf16>) outs(%o : memref<4x8x16xf32>) {
  ^bb0(%a: f32, %b: bf16, %acc: f32):
    %eb = arith.extf %b : bf16 to f32
    %m = arith.mulf %a, %eb : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// An embedding gradient, `for t: dE[idx[t], :] += g[t, :]`: a block per
// bin of dE's rows (8 here: bins are a power of two, at most 1024; rows 0
// and 8 share one) and 32
// threads (16 columns, a whole warp). Each block scans the 5 tokens in
// windows of 128 (4 per thread): a thread computes a token's row, a warp
// ballot marks the block's own, the warps' counts go to workgroup memory,
// the first warp turns them into their prefix (shuffles up) and the total,
// and each kept token (and its row) goes to the window's list in loop
// order. The block then runs only its listed tokens,
// each thread over its columns (loads, add, store past the last column
// skipped), so repeated indices add up in order and no two threads write
// one element. When the output row's offset moves along a dim of size > 1,
// threads could overlap: that loop stays in one thread.
// CHECK-LABEL: func.func @embedding_grad
// CHECK: gpu.launch blocks(%[[BIN:.*]], %{{.*}}, %{{.*}}) in ({{.*}} = %c8{{.*}}) threads(%[[TID:.*]], %{{.*}}, %{{.*}}) in ({{.*}} = %c32{{.*}}) workgroup(%[[ITERS:.*]] : memref<128xi32, #gpu.address_space<workgroup>>, %[[ROWS:.*]] : memref<128xi32, #gpu.address_space<workgroup>>, %[[COUNTS:.*]] : memref<5xi32, #gpu.address_space<workgroup>>)
// CHECK: %[[LANE:.*]] = arith.remui %[[TID]], %c32
// CHECK: %[[WARP:.*]] = arith.divui %[[TID]], %c32
// CHECK: scf.for %[[BASE:.*]] = %c0{{.*}} to %c5{{.*}} step %c128
// CHECK: %[[N:.*]] = arith.addi %[[BASE]]
// CHECK: %[[VALID:.*]] = arith.cmpi ult, %[[N]], %c5
// CHECK: %[[CLAMPED:.*]] = arith.minui %[[N]], %c4
// CHECK: %[[ID:.*]] = memref.load %arg0[
// CHECK: %[[ROW:.*]] = arith.index_cast %[[ID]] : i32 to index
// CHECK: %[[ROWBIN:.*]] = arith.andi %[[ROW]], %c7
// CHECK: %[[ISBIN:.*]] = arith.cmpi eq, %[[ROWBIN]], %[[BIN]]
// CHECK: %[[MINE:.*]] = arith.andi %[[VALID]], %[[ISBIN]]
// CHECK: %[[BALLOT:.*]] = nvvm.vote.sync  ballot %{{.*}}, %[[MINE]] -> i32
// CHECK: scf.if
// CHECK: %[[COUNT:.*]] = math.ctpop %[[BALLOT]]
// CHECK: memref.store %[[COUNT]], %[[COUNTS]]
// CHECK-COUNT-3: nvvm.vote.sync  ballot
// CHECK: gpu.barrier
// CHECK: %[[FIRSTWARP:.*]] = arith.cmpi eq, %[[WARP]], %c0
// CHECK: scf.if %[[FIRSTWARP]]
// CHECK: %[[ISPAIR:.*]] = arith.cmpi ult, %[[LANE]]
// CHECK: %[[COUNT:.*]] = scf.if %[[ISPAIR]] -> (i32) {
// CHECK-NEXT: %[[COUNTED:.*]] = memref.load %[[COUNTS]][%[[LANE]]]
// CHECK-NEXT: scf.yield %[[COUNTED]]
// CHECK-NEXT: } else {
// CHECK-COUNT-5: gpu.shuffle  up
// CHECK: %[[INCLUSIVE:.*]] = arith.addi
// CHECK: %[[EXCLUSIVE:.*]] = arith.subi %[[INCLUSIVE]], %[[COUNT]]
// CHECK: memref.store %[[EXCLUSIVE]], %[[COUNTS]][%[[LANE]]]
// CHECK: memref.store %[[INCLUSIVE]], %[[COUNTS]][%c4
// CHECK: gpu.barrier
// CHECK: %[[TOTAL:.*]] = memref.load %[[COUNTS]][%c4
// CHECK: %[[KEPT:.*]] = arith.index_cast %[[TOTAL]]
// CHECK: %[[START:.*]] = memref.load %[[COUNTS]]
// CHECK: %[[STARTAT:.*]] = arith.index_cast %[[START]]
// CHECK: scf.if %[[MINE]]
// CHECK: %[[BELOW:.*]] = arith.andi %[[BALLOT]]
// CHECK: %[[RANK:.*]] = math.ctpop %[[BELOW]]
// CHECK: %[[RANKAT:.*]] = arith.index_cast %[[RANK]]
// CHECK: %[[AT:.*]] = arith.addi %[[STARTAT]], %[[RANKAT]]
// CHECK: memref.store %{{.*}}, %[[ITERS]][%[[AT]]]
// CHECK: memref.store %{{.*}}, %[[ROWS]][%[[AT]]]
// CHECK-COUNT-3: scf.if
// CHECK: gpu.barrier
// CHECK: scf.for %[[J:.*]] = %c0{{.*}} to %[[KEPT]] step %c1
// CHECK: memref.load %[[ITERS]][%[[J]]]
// CHECK: %[[KEPTROW:.*]] = memref.load %[[ROWS]][%[[J]]]
// CHECK: %[[KROW:.*]] = arith.index_cast %[[KEPTROW]]
// CHECK: %[[G:.*]] = memref.subview %arg1[
// CHECK: %[[D:.*]] = memref.subview %arg2[%[[KROW]], 0] [1, 16]
// CHECK: %[[X:.*]] = memref.load %[[G]]
// CHECK: %[[ACC:.*]] = memref.load %[[D]][%[[R:.*]], %[[C:.*]]]
// CHECK: %[[SUM:.*]] = arith.addf %[[ACC]], %[[X]]
// CHECK: scf.if
// CHECK: memref.store %[[SUM]], %[[D]][%[[R]], %[[C]]]
// CHECK: gpu.barrier
// CHECK-NOT: linalg.generic
// CHECK: gpu.launch {{.*}} in ({{.*}} = %c1{{.*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c1{{.*}},
// CHECK: scf.for
// CHECK: memref.subview %arg2[%{{.*}}, %{{.*}}] [1, 16]
func.func @embedding_grad(%idx: memref<5xi32>, %g: memref<5x16xf32>, %de: memref<10x40xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  scf.for %t = %c0 to %c5 step %c1 {
    %i = memref.load %idx[%t] : memref<5xi32>
    %row = arith.index_cast %i : i32 to index
    %gt = memref.subview %g[%t, 0] [1, 16] [1, 1] : memref<5x16xf32> to memref<1x16xf32, strided<[16, 1], offset: ?>>
    %dt = memref.subview %de[%row, 0] [1, 16] [1, 1] : memref<10x40xf32> to memref<1x16xf32, strided<[40, 1], offset: ?>>
    linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r, c)>],
                    iterator_types = ["parallel", "parallel"]}
        ins(%gt : memref<1x16xf32, strided<[16, 1], offset: ?>>) outs(%dt : memref<1x16xf32, strided<[40, 1], offset: ?>>) {
    ^bb0(%x: f32, %acc: f32):
      %s = arith.addf %acc, %x : f32
      linalg.yield %s : f32
    }
  }
  scf.for %t = %c0 to %c5 step %c1 {
    %i = memref.load %idx[%t] : memref<5xi32>
    %row = arith.index_cast %i : i32 to index
    %gt = memref.subview %g[%t, 0] [1, 16] [1, 1] : memref<5x16xf32> to memref<1x16xf32, strided<[16, 1], offset: ?>>
    %dt = memref.subview %de[%c0, %row] [1, 16] [1, 1] : memref<10x40xf32> to memref<1x16xf32, strided<[40, 1], offset: ?>>
    linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r, c)>],
                    iterator_types = ["parallel", "parallel"]}
        ins(%gt : memref<1x16xf32, strided<[16, 1], offset: ?>>) outs(%dt : memref<1x16xf32, strided<[40, 1], offset: ?>>) {
    ^bb0(%x: f32, %acc: f32):
      %s = arith.addf %acc, %x : f32
      linalg.yield %s : f32
    }
  }
  return
}

// -----

// --profile-ops' hooks between a zero fill and its matrix product do not
// keep the fill: a profiled step runs the kernels an unprofiled one does.
// CHECK-LABEL: func.func @profiled_gemm
// CHECK-NOT: linalg.fill
// CHECK: llvm.call @dcrt_op_end
// CHECK: llvm.call @dcrt_op_begin
// CHECK: linalg.matmul {dc.gemm_overwrite}
llvm.func @dcrt_op_begin() -> i64
llvm.func @dcrt_op_end(!llvm.ptr, i64)
llvm.mlir.global internal constant @key("k\00")
func.func @profiled_gemm(%a: memref<8x16xf32>, %b: memref<16x4xf32>, %c: memref<8x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %t0 = llvm.call @dcrt_op_begin() : () -> i64
  linalg.fill ins(%zero : f32) outs(%c : memref<8x4xf32>)
  %k = llvm.mlir.addressof @key : !llvm.ptr
  %p = llvm.getelementptr %k[0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.array<2 x i8>
  llvm.call @dcrt_op_end(%p, %t0) : (!llvm.ptr, i64) -> ()
  %t1 = llvm.call @dcrt_op_begin() : () -> i64
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x4xf32>) outs(%c : memref<8x4xf32>)
  return
}

// -----

// A gather's start and wait (and views) between a zero fill and its matrix
// product do not keep the fill either: they touch only the runtime's
// buffers. A view of the output read in between keeps it (as a kernel).
// CHECK-LABEL: func.func @gathered_gemm
// CHECK-NOT: linalg.fill
// CHECK: dc.wait
// CHECK: linalg.matmul {dc.gemm_overwrite}
// CHECK-LABEL: func.func @fill_read_before_gemm
// CHECK: gpu.launch
// CHECK: dc.gather_start
// CHECK: linalg.matmul ins
// CHECK-NOT: dc.gemm_overwrite
func.func @gathered_gemm(%a: memref<8x16xbf16>, %shard: memref<64xbf16>, %arena: memref<256xi8>) {
  %zero = arith.constant 0.0 : bf16
  %c0 = arith.constant 0 : index
  %c = memref.view %arena[%c0][] : memref<256xi8> to memref<8x4xbf16>
  linalg.fill ins(%zero : bf16) outs(%c : memref<8x4xbf16>)
  %f = dc.gather_start %shard : memref<64xbf16> -> !dc.future<memref<16x4xbf16>>
  %b = dc.wait %f : !dc.future<memref<16x4xbf16>>
  linalg.matmul ins(%a, %b : memref<8x16xbf16>, memref<16x4xbf16>) outs(%c : memref<8x4xbf16>)
  dc.release %b : memref<16x4xbf16>
  return
}
func.func @fill_read_before_gemm(%a: memref<8x16xbf16>, %shard: memref<64xbf16>, %arena: memref<256xi8>) {
  %zero = arith.constant 0.0 : bf16
  %c0 = arith.constant 0 : index
  %c = memref.view %arena[%c0][] : memref<256xi8> to memref<8x4xbf16>
  linalg.fill ins(%zero : bf16) outs(%c : memref<8x4xbf16>)
  %flat = memref.collapse_shape %c [[0, 1]] : memref<8x4xbf16> into memref<32xbf16>
  %f = dc.gather_start %flat : memref<32xbf16> -> !dc.future<memref<16x4xbf16>>
  %b = dc.wait %f : !dc.future<memref<16x4xbf16>>
  linalg.matmul ins(%a, %b : memref<8x16xbf16>, memref<16x4xbf16>) outs(%c : memref<8x4xbf16>)
  dc.release %b : memref<16x4xbf16>
  return
}

// -----

// An elementwise op on other buffers between a zero fill and its matrix
// product (dc-rematerialize puts a recomputed operand there) does not keep
// the fill; one that writes the product's output does.
// CHECK-LABEL: func.func @recomputed_operand_gemm
// CHECK-NOT: linalg.fill
// CHECK: gpu.launch
// CHECK: linalg.matmul {dc.gemm_overwrite}
// CHECK-LABEL: func.func @output_written_before_gemm
// CHECK: gpu.launch
// CHECK: gpu.launch
// CHECK: linalg.matmul ins
// CHECK-NOT: dc.gemm_overwrite
func.func @recomputed_operand_gemm(%x: memref<8x16xbf16>, %a: memref<8x16xbf16>, %b: memref<16x4xbf16>, %c: memref<8x4xbf16>) {
  %zero = arith.constant 0.0 : bf16
  linalg.fill ins(%zero : bf16) outs(%c : memref<8x4xbf16>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<8x16xbf16>) outs(%a : memref<8x16xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %d = arith.addf %in, %in : bf16
    linalg.yield %d : bf16
  }
  linalg.matmul ins(%a, %b : memref<8x16xbf16>, memref<16x4xbf16>) outs(%c : memref<8x4xbf16>)
  return
}
func.func @output_written_before_gemm(%x: memref<8x4xbf16>, %a: memref<8x16xbf16>, %b: memref<16x4xbf16>, %c: memref<8x4xbf16>) {
  %zero = arith.constant 0.0 : bf16
  linalg.fill ins(%zero : bf16) outs(%c : memref<8x4xbf16>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<8x4xbf16>) outs(%c : memref<8x4xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %d = arith.addf %in, %out : bf16
    linalg.yield %d : bf16
  }
  linalg.matmul ins(%a, %b : memref<8x16xbf16>, memref<16x4xbf16>) outs(%c : memref<8x4xbf16>)
  return
}

// -----

// A longer loop (1500 iterations of step 2) on wider rows (600 columns,
// bf16 into f32): 32 bins of 256 threads, two windows of 1024 iterations
// (the iteration number times the step is the token), and each thread runs
// a kept token on its 3 columns at once: 3 pairs of loads, then 3 adds,
// then 3 stores, each skipped past column 599.
// CHECK-LABEL: func.func @embedding_grad_wide
// CHECK: gpu.launch {{.*}} in ({{.*}} = %c32{{.*}}) threads(%[[TID:.*]], %{{.*}}, %{{.*}}) in ({{.*}} = %c256{{.*}}) workgroup({{.*}} : memref<1024xi32, #gpu.address_space<workgroup>>, {{.*}} : memref<1024xi32, #gpu.address_space<workgroup>>, {{.*}} : memref<33xi32, #gpu.address_space<workgroup>>)
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %c1500{{.*}} step %c1024
// CHECK: %[[TOKEN:.*]] = arith.muli %{{.*}}, %c2
// CHECK: memref.load %arg0[%{{.*}}]
// CHECK: scf.for %{{.*}} = %c0{{.*}} to %{{.*}} step %c1
// CHECK: scf.for %[[CHUNK:.*]] = %c0{{.*}} to %c1{{.*}} step %c1
// CHECK: arith.minui %{{.*}}, %c599
// CHECK-NOT: arith.addf
// CHECK-COUNT-6: memref.load %subview
// CHECK-NOT: memref.store
// CHECK-COUNT-3: arith.addf
// CHECK: scf.if
// CHECK-NEXT: memref.store
// CHECK: scf.if
// CHECK-NEXT: memref.store
// CHECK: scf.if
// CHECK-NEXT: memref.store
// CHECK: gpu.barrier
func.func @embedding_grad_wide(%idx: memref<3000xi32>, %g: memref<3000x600xbf16>, %de: memref<40x600xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c3000 = arith.constant 3000 : index
  scf.for %t = %c0 to %c3000 step %c2 {
    %i = memref.load %idx[%t] : memref<3000xi32>
    %row = arith.index_cast %i : i32 to index
    %gt = memref.subview %g[%t, 0] [1, 600] [1, 1] : memref<3000x600xbf16> to memref<1x600xbf16, strided<[600, 1], offset: ?>>
    %dt = memref.subview %de[%row, 0] [1, 600] [1, 1] : memref<40x600xf32> to memref<1x600xf32, strided<[600, 1], offset: ?>>
    linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r, c)>],
                    iterator_types = ["parallel", "parallel"]}
        ins(%gt : memref<1x600xbf16, strided<[600, 1], offset: ?>>) outs(%dt : memref<1x600xf32, strided<[600, 1], offset: ?>>) {
    ^bb0(%x: bf16, %acc: f32):
      %e = arith.extf %x : bf16 to f32
      %s = arith.addf %acc, %e : f32
      linalg.yield %s : f32
    }
  }
  return
}

// -----

// A column-parallel loop whose op also reads the buffer it writes (another
// row of it) is not split by rows: a thread per column runs every
// iteration, as before.
// CHECK-LABEL: func.func @row_reads_output
// CHECK: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c16{{.*}},
// CHECK-NOT: arith.cmpi eq
// CHECK: scf.for
// CHECK-NOT: scf.if
// CHECK: memref.store
func.func @row_reads_output(%idx: memref<5xi32>, %de: memref<10x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  scf.for %t = %c0 to %c5 step %c1 {
    %i = memref.load %idx[%t] : memref<5xi32>
    %row = arith.index_cast %i : i32 to index
    %src = memref.subview %de[%t, 0] [1, 16] [1, 1] : memref<10x16xf32> to memref<1x16xf32, strided<[16, 1], offset: ?>>
    %dst = memref.subview %de[%row, 0] [1, 16] [1, 1] : memref<10x16xf32> to memref<1x16xf32, strided<[16, 1], offset: ?>>
    linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r, c)>],
                    iterator_types = ["parallel", "parallel"]}
        ins(%src : memref<1x16xf32, strided<[16, 1], offset: ?>>) outs(%dst : memref<1x16xf32, strided<[16, 1], offset: ?>>) {
    ^bb0(%x: f32, %acc: f32):
      %s = arith.addf %acc, %x : f32
      linalg.yield %s : f32
    }
  }
  return
}

// -----

// In the step arena, an input at a byte range disjoint from the output's
// is another buffer: the loop runs a block per bin of rows (8). An input whose
// range overlaps the output's is not.
// CHECK-LABEL: func.func @arena_embedding_grad
// CHECK: gpu.launch {{.*}} in ({{.*}} = %c8{{.*}}) threads({{.*}}) in ({{.*}} = %c32{{.*}}) workgroup
// CHECK: arith.andi %{{.*}}, %c7
// CHECK-LABEL: func.func @arena_overlapping_rows
// CHECK: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c16{{.*}},
// CHECK-NOT: arith.cmpi eq
func.func @arena_embedding_grad(%idx: memref<5xi32>, %arena: memref<1024xi8>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %c320 = arith.constant 320 : index
  %g = memref.view %arena[%c0][] : memref<1024xi8> to memref<5x16xf32>
  %de = memref.view %arena[%c320][] : memref<1024xi8> to memref<10x16xf32>
  scf.for %t = %c0 to %c5 step %c1 {
    %i = memref.load %idx[%t] : memref<5xi32>
    %row = arith.index_cast %i : i32 to index
    %gt = memref.subview %g[%t, 0] [1, 16] [1, 1] : memref<5x16xf32> to memref<1x16xf32, strided<[16, 1], offset: ?>>
    %dt = memref.subview %de[%row, 0] [1, 16] [1, 1] : memref<10x16xf32> to memref<1x16xf32, strided<[16, 1], offset: ?>>
    linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r, c)>],
                    iterator_types = ["parallel", "parallel"]}
        ins(%gt : memref<1x16xf32, strided<[16, 1], offset: ?>>) outs(%dt : memref<1x16xf32, strided<[16, 1], offset: ?>>) {
    ^bb0(%x: f32, %acc: f32):
      %s = arith.addf %acc, %x : f32
      linalg.yield %s : f32
    }
  }
  return
}
func.func @arena_overlapping_rows(%idx: memref<5xi32>, %arena: memref<1024xi8>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %c256 = arith.constant 256 : index
  %g = memref.view %arena[%c0][] : memref<1024xi8> to memref<5x16xf32>
  %de = memref.view %arena[%c256][] : memref<1024xi8> to memref<10x16xf32>
  scf.for %t = %c0 to %c5 step %c1 {
    %i = memref.load %idx[%t] : memref<5xi32>
    %row = arith.index_cast %i : i32 to index
    %gt = memref.subview %g[%t, 0] [1, 16] [1, 1] : memref<5x16xf32> to memref<1x16xf32, strided<[16, 1], offset: ?>>
    %dt = memref.subview %de[%row, 0] [1, 16] [1, 1] : memref<10x16xf32> to memref<1x16xf32, strided<[16, 1], offset: ?>>
    linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r, c)>],
                    iterator_types = ["parallel", "parallel"]}
        ins(%gt : memref<1x16xf32, strided<[16, 1], offset: ?>>) outs(%dt : memref<1x16xf32, strided<[16, 1], offset: ?>>) {
    ^bb0(%x: f32, %acc: f32):
      %s = arith.addf %acc, %x : f32
      linalg.yield %s : f32
    }
  }
  return
}

// -----

// Buffers of the step arena at byte offsets: the scaled rows %y reuse the
// bytes of %x one row (1024 bytes) further on. Row r of %y is row r + 1 of
// %x, which another block still reads for its sum: the scale does not join
// the reduction's kernel. Written in place (%y at %x's offset, the same
// layout) it joins: each warp reads its row before it writes it.
// CHECK-LABEL: func.func @shifted_reuse
// CHECK: gpu.launch
// CHECK: gpu.all_reduce
// CHECK: gpu.terminator
// CHECK: gpu.launch
// CHECK-NOT: gpu.all_reduce
// CHECK: return
// CHECK-LABEL: func.func @in_place
// CHECK: gpu.launch
// CHECK: gpu.shuffle xor
// CHECK: nvvm.bar.warp.sync
// CHECK: vector.store
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @shifted_reuse(%arena: memref<16384xi8>, %ss: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1024 = arith.constant 1024 : index
  %zero = arith.constant 0.0 : f32
  %x = memref.view %arena[%c0][] : memref<16384xi8> to memref<8x512xbf16>
  %y = memref.view %arena[%c1024][] : memref<16384xi8> to memref<8x512xbf16>
  linalg.fill ins(%zero : f32) outs(%ss : memref<8xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x512xbf16>) outs(%ss : memref<8xf32>) {
  ^bb0(%in: bf16, %acc: f32):
    %f = arith.extf %in : bf16 to f32
    %s = arith.addf %acc, %f : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>,
                                   affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss : memref<8x512xbf16>, memref<8xf32>) outs(%y : memref<8x512xbf16>) {
  ^bb0(%in: bf16, %s: f32, %out: bf16):
    %f = arith.extf %in : bf16 to f32
    %d = arith.divf %f, %s : f32
    %t = arith.truncf %d : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}
func.func @in_place(%arena: memref<16384xi8>, %ss: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %x = memref.view %arena[%c0][] : memref<16384xi8> to memref<8x512xbf16>
  %y = memref.view %arena[%c0][] : memref<16384xi8> to memref<8x512xbf16>
  linalg.fill ins(%zero : f32) outs(%ss : memref<8xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x512xbf16>) outs(%ss : memref<8xf32>) {
  ^bb0(%in: bf16, %acc: f32):
    %f = arith.extf %in : bf16 to f32
    %s = arith.addf %acc, %f : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>,
                                   affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss : memref<8x512xbf16>, memref<8xf32>) outs(%y : memref<8x512xbf16>) {
  ^bb0(%in: bf16, %s: f32, %out: bf16):
    %f = arith.extf %in : bf16 to f32
    %d = arith.divf %f, %s : f32
    %t = arith.truncf %d : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// Values kept between members are forgotten where a member writes memory
// that may alias them: the scale writes the row in place through another
// view (%y), so the max after it loads %x again instead of reusing the
// row loaded for the sum (which the scale overwrote).
// CHECK-LABEL: func.func @kept_after_in_place_write
// CHECK: gpu.launch
// CHECK: scf.if %{{.*}} {
// CHECK: %[[X:.*]] = vector.load %[[XV:.*]][%{{.*}}, %[[P:.*]]] {alignment = 16 : i64}
// CHECK: gpu.shuffle xor
// CHECK: vector.store %{{.*}}, %[[YV:.*]][%{{.*}}, %[[P]]]
// CHECK: nvvm.bar.warp.sync
// CHECK: vector.load %[[XV]][%{{.*}}, %[[P]]]
// CHECK: arith.maximumf
// CHECK: gpu.shuffle xor
// CHECK: } else {
func.func @kept_after_in_place_write(%arena: memref<16384xi8>, %ss: memref<8xf32>, %mx: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %x = memref.view %arena[%c0][] : memref<16384xi8> to memref<8x512xbf16>
  %y = memref.view %arena[%c0][] : memref<16384xi8> to memref<8x512xbf16>
  linalg.fill ins(%zero : f32) outs(%ss : memref<8xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x512xbf16>) outs(%ss : memref<8xf32>) {
  ^bb0(%in: bf16, %acc: f32):
    %f = arith.extf %in : bf16 to f32
    %s = arith.addf %acc, %f : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>,
                                   affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss : memref<8x512xbf16>, memref<8xf32>) outs(%y : memref<8x512xbf16>) {
  ^bb0(%in: bf16, %s: f32, %out: bf16):
    %f = arith.extf %in : bf16 to f32
    %d = arith.divf %f, %s : f32
    %t = arith.truncf %d : f32 to bf16
    linalg.yield %t : bf16
  }
  linalg.fill ins(%ninf : f32) outs(%mx : memref<8xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x512xbf16>) outs(%mx : memref<8xf32>) {
  ^bb0(%in: bf16, %acc: f32):
    %f = arith.extf %in : bf16 to f32
    %m = arith.maximumf %acc, %f : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// Rows of 4096 bf16s are too long for a warp (16 steps of 32 lanes; a
// warp takes at most 4, as for config A's 2048-wide rows, which take 8):
// a block of 256 threads per row, 2 steps each, a block-wide
// gpu.all_reduce. The per-row values are still computed by every thread from
// kept values (thread 0 alone stores them): the scale reads neither the
// sums nor the rsqrt back from memory, and each thread reads only the
// columns it wrote, so no block barrier lies between the members (the
// reduction's own two remain).
// With single-barrier-reductions the block-wide sum is a butterfly of
// shuffles in each warp, lane 0's total into the reduction's own slots (8
// warps), one barrier, and every thread adding the 8 slots in warp order;
// no gpu.all_reduce (the rows' unaligned path the same, with slots of its
// own).
// SINGLE-LABEL: func.func @norm_wide
// SINGLE: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c256{{.*}}) workgroup(%[[SLOTS:[^ ]*]] : memref<8xf32, #gpu.address_space<workgroup>>,
// SINGLE-NOT: gpu.all_reduce
// SINGLE: gpu.shuffle xor %{{.*}}, %c16_i32, %c32_i32
// SINGLE-COUNT-4: gpu.shuffle xor
// SINGLE: %[[LANE:.*]] = arith.remui %{{.*}}, %c32
// SINGLE: %[[WARP:.*]] = arith.divui %{{.*}}, %c32
// SINGLE: %[[LEADER:.*]] = arith.cmpi eq, %[[LANE]], %c0
// SINGLE: scf.if %[[LEADER]] {
// SINGLE-NEXT: memref.store %{{.*}}, %[[SLOTS]][%[[WARP]]]
// SINGLE-NEXT: }
// SINGLE-NEXT: gpu.barrier
// SINGLE: %[[S0:.*]] = memref.load %[[SLOTS]][%c0
// SINGLE: %[[S1:.*]] = memref.load %[[SLOTS]][%c1
// SINGLE-NEXT: %[[T1:.*]] = arith.addf %[[S0]], %[[S1]]
// SINGLE-COUNT-6: memref.load %[[SLOTS]]
// SINGLE-NOT: gpu.all_reduce
// SINGLE: gpu.terminator
// CHECK-LABEL: func.func @norm_wide
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in ({{.*}} = %c4{{.*}}, {{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in ({{.*}} = %c256{{.*}},
// CHECK-NOT: arith.divui
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[TX]], %c0
// CHECK: scf.if %{{.*}} {
// CHECK-NOT: gpu.barrier
// CHECK: %[[ALL:.*]] = gpu.all_reduce add
// CHECK-NOT: memref.load
// CHECK: %[[SUM:.*]] = arith.addf %{{.*}}, %[[ALL]]
// CHECK-NEXT: scf.if %[[FIRST]]
// CHECK-NEXT: memref.store %[[SUM]], %arg1[%[[BX]]]
// CHECK-NOT: gpu.barrier
// CHECK-NOT: memref.load
// CHECK: %[[RSTD:.*]] = math.rsqrt %{{.*}}
// CHECK-NEXT: scf.if %[[FIRST]]
// CHECK-NEXT: memref.store %[[RSTD]], %arg2[%[[BX]]]
// CHECK-NOT: gpu.barrier
// CHECK-NOT: memref.load
// CHECK: arith.mulf %{{.*}}, %[[RSTD]]
// CHECK: vector.store
// CHECK-NOT: gpu.barrier
// CHECK: } else {
// CHECK-NOT: gpu.barrier
// CHECK: gpu.terminator
func.func @norm_wide(%x: memref<4x4096xbf16>, %ss: memref<4xf32>,
                     %rstd: memref<4xf32>, %y: memref<4x4096xbf16>) {
  %zero = arith.constant 0.0 : f32
  %eps = arith.constant 1.0e-5 : f32
  linalg.fill ins(%zero : f32) outs(%ss : memref<4xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x4096xbf16>) outs(%ss : memref<4xf32>) {
  ^bb0(%in: bf16, %acc: f32):
    %f = arith.extf %in : bf16 to f32
    %sq = arith.mulf %f, %f : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r) -> (r)>, affine_map<(r) -> (r)>],
                  iterator_types = ["parallel"]}
      ins(%ss : memref<4xf32>) outs(%rstd : memref<4xf32>) {
  ^bb0(%in: f32, %out: f32):
    %a = arith.addf %in, %eps : f32
    %r = math.rsqrt %a : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>,
                                   affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %rstd : memref<4x4096xbf16>, memref<4xf32>) outs(%y : memref<4x4096xbf16>) {
  ^bb0(%in: bf16, %r: f32, %out: bf16):
    %f = arith.extf %in : bf16 to f32
    %n = arith.mulf %f, %r : f32
    %t = arith.truncf %n : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// As @norm_wide, but the scale's output is written through one view of the
// arena and the second sum reads it through another view of the same
// bytes. Same memory, same layout, but not provably the same thread's
// columns: the barrier before that sum stays (and only that one).
// CHECK-LABEL: func.func @aliased_views_keep_barrier
// CHECK: %[[Y:.*]] = memref.view %arg2
// CHECK: %[[Y2:.*]] = memref.view %arg2
// CHECK: gpu.launch
// CHECK-NOT: gpu.barrier
// CHECK: gpu.all_reduce
// CHECK-NOT: gpu.barrier
// CHECK: vector.store %{{.*}}, %[[Y]]
// CHECK-NOT: gpu.barrier
// CHECK: vector.store %{{.*}}, %[[Y]]
// CHECK: gpu.barrier
// CHECK-NOT: vector.store
// CHECK: vector.load %[[Y2]]
// CHECK-NOT: gpu.barrier
// CHECK: } else {
// CHECK-NOT: gpu.barrier
// CHECK: memref.store %{{.*}}, %[[Y]]
// CHECK: gpu.barrier
// CHECK-NOT: memref.store %{{.*}}, %[[Y]]
// CHECK: memref.load %[[Y2]]
// CHECK-NOT: gpu.barrier
// CHECK: gpu.terminator
func.func @aliased_views_keep_barrier(%x: memref<4x4096xbf16>, %ss: memref<4xf32>, %arena: memref<32768xi8>, %s2: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %y = memref.view %arena[%c0][] : memref<32768xi8> to memref<4x4096xbf16>
  %y2 = memref.view %arena[%c0][] : memref<32768xi8> to memref<4x4096xbf16>
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%ss : memref<4xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x4096xbf16>) outs(%ss : memref<4xf32>) {
  ^bb0(%in: bf16, %acc: f32):
    %f = arith.extf %in : bf16 to f32
    %s = arith.addf %acc, %f : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>,
                                   affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss : memref<4x4096xbf16>, memref<4xf32>) outs(%y : memref<4x4096xbf16>) {
  ^bb0(%in: bf16, %r: f32, %out: bf16):
    %f = arith.extf %in : bf16 to f32
    %n = arith.mulf %f, %r : f32
    %t = arith.truncf %n : f32 to bf16
    linalg.yield %t : bf16
  }
  linalg.fill ins(%zero : f32) outs(%s2 : memref<4xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%y2 : memref<4x4096xbf16>) outs(%s2 : memref<4xf32>) {
  ^bb0(%in: bf16, %acc: f32):
    %f = arith.extf %in : bf16 to f32
    %s = arith.addf %acc, %f : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A warp per row, 12 rows: two blocks of 8 warps, and the second block's
// last 4 warps (rows 12-15) skip the whole group (no block barrier waits
// for them).
// CHECK-LABEL: func.func @warp_spare_rows
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in ({{.*}} = %c2{{.*}}, {{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in ({{.*}} = %c256{{.*}},
// CHECK: %[[ROW:.*]] = arith.addi
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[ROW]], %c12
// CHECK-NEXT: scf.if %[[IN]] {
// CHECK: gpu.shuffle xor
// CHECK-NOT: gpu.barrier
// CHECK: gpu.terminator
func.func @warp_spare_rows(%x: memref<12x256xbf16>, %ss: memref<12xf32>, %y: memref<12x256xbf16>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%ss : memref<12xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<12x256xbf16>) outs(%ss : memref<12xf32>) {
  ^bb0(%in: bf16, %acc: f32):
    %f = arith.extf %in : bf16 to f32
    %s = arith.addf %acc, %f : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>,
                                   affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss : memref<12x256xbf16>, memref<12xf32>) outs(%y : memref<12x256xbf16>) {
  ^bb0(%in: bf16, %s: f32, %out: bf16):
    %f = arith.extf %in : bf16 to f32
    %d = arith.divf %f, %s : f32
    %t = arith.truncf %d : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// A column reduction whose rows are not whole 16-byte vectors (18 f32
// columns): 64 lanes of one column times 4 row lanes, each summing every
// 4th row of a column; lane 0 adds the 4 partial sums from shared memory
// in order, then folds the total into the output.
// CHECK-LABEL: func.func @column_sums_by_element
// CHECK: gpu.launch {{.*}} workgroup(%[[PARTIALS:.*]] : memref<256xf32, #gpu.address_space<workgroup>>)
// CHECK: %[[LANE:.*]] = arith.remui %{{.*}}, %c64
// CHECK: %[[ROWLANE:.*]] = arith.divui %{{.*}}, %c64
// CHECK: %[[COL:.*]] = arith.addi %{{.*}}, %[[LANE]]
// CHECK: %[[VALID:.*]] = arith.cmpi ult, %[[COL]], %c18
// CHECK: %[[PARTIAL:.*]] = scf.if %[[VALID]] -> (f32)
// CHECK: scf.for %[[ROW:.*]] = %[[ROWLANE]] to %{{.*}} step %c4
// CHECK: memref.load %arg0[%[[ROW]], %[[COL]]]
// CHECK-NOT: vector.load
// CHECK: memref.store %[[PARTIAL]], %[[PARTIALS]]
// CHECK-NEXT: gpu.barrier
// CHECK-COUNT-4: memref.load %[[PARTIALS]]
// CHECK-NOT: memref.load %[[PARTIALS]]
// CHECK: %[[OLD:.*]] = memref.load %arg1[%[[COL]]]
// CHECK: %[[NEW:.*]] = arith.addf %{{.*}}, %[[OLD]]
// CHECK: memref.store %[[NEW]], %arg1[%[[COL]]]
func.func @column_sums_by_element(%a: memref<8x18xf32>, %colsum: memref<18xf32>) {
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (c)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%a : memref<8x18xf32>) outs(%colsum : memref<18xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A norm's weight gradient (bf16 rows, f32 sums): 8 lanes of 8 columns
// (one 16-byte load of g and of x per row: a warp reads 4 rows of 128
// bytes) times 32 row lanes; the per-row rstd is one load per row, shared
// by the 8 columns. Too many rows (2048) for narrower blocks: 64 columns
// per block although there is one block.
// CHECK-LABEL: func.func @weight_grad
// CHECK: gpu.launch {{.*}} workgroup(%[[PARTIALS:.*]] : memref<2048xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<256xf32, #gpu.address_space<workgroup>>)
// CHECK: arith.remui %{{.*}}, %c8
// CHECK: scf.for %[[ROW:.*]] = %{{.*}} to %c2048{{.*}} step %c128
// CHECK-DAG: vector.load %arg0[%[[ROW]], %{{.*}}] {alignment = 16 : i64} : memref<2048x32xbf16>, vector<8xbf16>
// CHECK-DAG: vector.load %arg1[%[[ROW]], %{{.*}}] {alignment = 16 : i64} : memref<2048x32xbf16>, vector<8xbf16>
// CHECK-DAG: memref.load %arg2[%[[ROW]]] : memref<2048xf32>
// CHECK-COUNT-3: memref.load %arg2
// CHECK-NOT: memref.load %arg2
// CHECK: scf.yield
// CHECK: } else {
func.func @weight_grad(%g: memref<2048x32xbf16>, %x: memref<2048x32xbf16>, %rstd: memref<2048xf32>, %dw: memref<32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r, c)>,
                                   affine_map<(r, c) -> (r)>, affine_map<(r, c) -> (c)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%g, %x, %rstd : memref<2048x32xbf16>, memref<2048x32xbf16>, memref<2048xf32>) outs(%dw : memref<32xf32>) {
  ^bb0(%a: bf16, %b: bf16, %r: f32, %acc: f32):
    %af = arith.extf %a : bf16 to f32
    %bf = arith.extf %b : bf16 to f32
    %p = arith.mulf %af, %bf : f32
    %q = arith.mulf %p, %r : f32
    %s = arith.addf %acc, %q : f32
    linalg.yield %s : f32
  }
  return
}

// A short column reduction (a split's second pass: 512 partial rows of
// 2048 f32 columns) that 64-column blocks would give 32 blocks: 16-column
// blocks, 128 of them, each 4 vector lanes of 4 columns times 64 row lanes
// that load all their 8 rows before adding them, then fold 16 groups of 4
// row lanes and the 16 groups in a fixed order.
// CHECK-LABEL: func.func @short_column_sums
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %c128{{.*}}, {{.*}}) threads({{.*}}) in (%{{.*}} = %c256{{.*}}, {{.*}}) workgroup(%[[PARTIALS:.*]] : memref<1024xf32, #gpu.address_space<workgroup>>, %[[GROUPS:.*]] : memref<256xf32, #gpu.address_space<workgroup>>)
// CHECK: %[[LANE:.*]] = arith.remui %{{.*}}, %c4
// CHECK: %[[ROWLANE:.*]] = arith.divui %{{.*}}, %c4
// CHECK: scf.for %{{.*}} = %[[ROWLANE]] to %c512{{.*}} step %c512
// CHECK-COUNT-8: vector.load %arg0[{{.*}}] {alignment = 16 : i64} : memref<512x2048xf32>, vector<4xf32>
// CHECK-NOT: vector.load
// CHECK: scf.yield
// CHECK: } else {
// CHECK: gpu.barrier
// CHECK-COUNT-4: memref.load %[[PARTIALS]]
// CHECK-NOT: memref.load %[[PARTIALS]]
// CHECK: gpu.barrier
// CHECK-COUNT-16: memref.load %[[GROUPS]]
// CHECK-NOT: memref.load %[[GROUPS]]
// CHECK: memref.store %{{.*}}, %arg1[
func.func @short_column_sums(%p: memref<512x2048xf32>, %dw: memref<2048xf32>) {
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (c)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%p : memref<512x2048xf32>) outs(%dw : memref<2048xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A bf16 weight gradient as dc-split-column-reductions leaves it: the
// zero fills of the partial sums and of the f32 total fold into the two
// passes' stores (each stores 0 + its total, reading no old value), and
// the bf16 conversion into the second pass's store: three kernels fewer.
// CHECK-LABEL: func.func @weight_grad_tail
// CHECK-NOT: linalg.fill
// CHECK: gpu.launch
// CHECK-NOT: memref.load %arg2
// CHECK: %[[PARTIAL:.*]] = arith.addf %cst{{.*}}, %{{.*}} : f32
// CHECK-NEXT: memref.store %[[PARTIAL]], %arg2[
// CHECK: gpu.terminator
// CHECK: gpu.launch
// CHECK-NOT: memref.load %arg3
// CHECK: %[[SUM:.*]] = arith.addf %cst{{.*}}, %{{.*}} : f32
// CHECK-NEXT: memref.store %[[SUM]], %arg3[%[[AT:.*]]] : memref<32xf32>
// CHECK-NEXT: %[[BF:.*]] = arith.truncf %[[SUM]] : f32 to bf16
// CHECK-NEXT: memref.store %[[BF]], %arg4[%[[AT]]] : memref<32xbf16>
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @weight_grad_tail(%g: memref<2x32x32xbf16>, %x: memref<2x32x32xbf16>, %partials: memref<2x32xf32>,
                            %dw: memref<32xf32>, %dw16: memref<32xbf16>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%dw : memref<32xf32>)
  linalg.fill ins(%zero : f32) outs(%partials : memref<2x32xf32>)
  linalg.generic {indexing_maps = [affine_map<(k, r, c) -> (k, r, c)>, affine_map<(k, r, c) -> (k, r, c)>,
                                   affine_map<(k, r, c) -> (k, c)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%g, %x : memref<2x32x32xbf16>, memref<2x32x32xbf16>) outs(%partials : memref<2x32xf32>) {
  ^bb0(%a: bf16, %b: bf16, %acc: f32):
    %af = arith.extf %a : bf16 to f32
    %bf = arith.extf %b : bf16 to f32
    %p = arith.mulf %af, %bf : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(k, c) -> (k, c)>, affine_map<(k, c) -> (c)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%partials : memref<2x32xf32>) outs(%dw : memref<32xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(c) -> (c)>, affine_map<(c) -> (c)>],
                  iterator_types = ["parallel"]}
      ins(%dw : memref<32xf32>) outs(%dw16 : memref<32xbf16>) {
  ^bb0(%a: f32, %out: bf16):
    %t = arith.truncf %a : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// What must stay: a fill that is not the sum's identity (1.0), a fill
// whose value an op in between reads, and a consumer that also reads
// another buffer are kernels of their own; the sums then fold into the
// loaded value.
// CHECK-LABEL: func.func @reduction_tail_kept
// CHECK: gpu.launch
// CHECK: memref.store %cst, %arg1
// CHECK: gpu.launch
// CHECK: %[[OLD1:.*]] = memref.load %arg1[
// CHECK: arith.addf %[[OLD1]]
// CHECK: gpu.launch
// CHECK: memref.store %cst{{.*}}, %arg2
// CHECK: gpu.launch
// CHECK: memref.store %{{.*}}, %arg4
// CHECK: gpu.launch
// CHECK: %[[OLD2:.*]] = memref.load %arg2[
// CHECK: arith.addf %[[OLD2]]
// CHECK: gpu.launch
// CHECK: memref.load %arg5
// CHECK: memref.store %{{.*}}, %arg3
// CHECK: return
func.func @reduction_tail_kept(%x: memref<64x32xf32>, %s1: memref<32xf32>, %s2: memref<32xf32>,
                               %out: memref<32xf32>, %copy: memref<32xf32>, %other: memref<32xf32>) {
  %one = arith.constant 1.0 : f32
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%one : f32) outs(%s1 : memref<32xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (c)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<64x32xf32>) outs(%s1 : memref<32xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  linalg.fill ins(%zero : f32) outs(%s2 : memref<32xf32>)
  linalg.copy ins(%s2 : memref<32xf32>) outs(%copy : memref<32xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (c)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<64x32xf32>) outs(%s2 : memref<32xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(c) -> (c)>, affine_map<(c) -> (c)>, affine_map<(c) -> (c)>],
                  iterator_types = ["parallel"]}
      ins(%s2, %other : memref<32xf32>, memref<32xf32>) outs(%out : memref<32xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %t = arith.addf %a, %b : f32
    linalg.yield %t : f32
  }
  return
}

// -----

// A matrix product stays a library call: the scale after it (attention's
// scores) is a kernel of its own, not folded into a store the product's
// kernel never makes (tiny-fused's losses went wrong on the GPU when it was).
// CHECK-LABEL: func.func @product_then_scale
// CHECK: linalg.matmul
// CHECK: gpu.launch
// CHECK: arith.mulf
// CHECK: store %{{.*}}, %arg3
func.func @product_then_scale(%a: memref<8x16xf32>, %b: memref<16x4xf32>, %c: memref<8x4xf32>, %d: memref<8x4xf32>) {
  %s = arith.constant 0.25 : f32
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x4xf32>) outs(%c : memref<8x4xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<8x4xf32>) outs(%d : memref<8x4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %y = arith.mulf %x, %s : f32
    linalg.yield %y : f32
  }
  return
}

// -----

// Config A's norm rows (2048 bf16s) would take 8 steps of a warp, each
// lane keeping 64 values (80 registers forward, 160 backward, one block
// per SM): a block of 128 threads per row instead, two 16-byte chunks
// each (both loaded before the sum), kept in registers. Rows of 1024 take
// 4 steps of a warp: a warp per row (8 rows, one block).
// CHECK-LABEL: func.func @row_width_picks_warp_or_block
// CHECK: gpu.launch {{.*}} in ({{.*}} = %c4{{.*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c128{{.*}},
// CHECK-NOT: gpu.shuffle
// CHECK: vector.load %arg0
// CHECK-NEXT: vector.load %arg0
// CHECK-NOT: vector.load %arg0
// CHECK: gpu.all_reduce add
// CHECK: gpu.terminator
// CHECK: gpu.launch {{.*}} in ({{.*}} = %c1{{.*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c256{{.*}},
// CHECK-NOT: gpu.all_reduce
// CHECK: gpu.shuffle xor
// CHECK: gpu.terminator
func.func @row_width_picks_warp_or_block(%x: memref<4x2048xbf16>, %ss: memref<4xf32>, %y: memref<4x2048xbf16>,
                                         %u: memref<8x1024xbf16>, %us: memref<8xf32>, %v: memref<8x1024xbf16>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%ss : memref<4xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x2048xbf16>) outs(%ss : memref<4xf32>) {
  ^bb0(%in: bf16, %acc: f32):
    %f = arith.extf %in : bf16 to f32
    %s = arith.addf %acc, %f : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>,
                                   affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss : memref<4x2048xbf16>, memref<4xf32>) outs(%y : memref<4x2048xbf16>) {
  ^bb0(%in: bf16, %s: f32, %out: bf16):
    %f = arith.extf %in : bf16 to f32
    %d = arith.divf %f, %s : f32
    %t = arith.truncf %d : f32 to bf16
    linalg.yield %t : bf16
  }
  linalg.fill ins(%zero : f32) outs(%us : memref<8xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%u : memref<8x1024xbf16>) outs(%us : memref<8xf32>) {
  ^bb0(%in: bf16, %acc: f32):
    %f = arith.extf %in : bf16 to f32
    %s = arith.addf %acc, %f : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>,
                                   affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%u, %us : memref<8x1024xbf16>, memref<8xf32>) outs(%v : memref<8x1024xbf16>) {
  ^bb0(%in: bf16, %s: f32, %out: bf16):
    %f = arith.extf %in : bf16 to f32
    %d = arith.divf %f, %s : f32
    %t = arith.truncf %d : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// Per-row values that are not kept stay thread 0's: the sums have no fill
// in the group (their old value is in memory), so thread 0 alone loads,
// folds and stores them; the per-row update of %b reads and writes %b in
// place, so thread 0 alone runs it too. The scale then reads both from
// memory, after the warp barrier (no thread can read a sum or %b that
// thread 0 has not stored, nor see thread 0's store before its own load).
// CHECK-LABEL: func.func @kept_fallbacks
// CHECK: gpu.launch
// CHECK: %[[FIRST:.*]] = arith.cmpi eq
// CHECK: scf.if %{{.*}} {
// CHECK: %[[S1:[[:alnum:]_]+]], %{{.*}} = gpu.shuffle xor %[[P1:[[:alnum:]_]+]], %c1_i32,
// CHECK-NEXT: %[[TOTAL:.*]] = arith.addf %[[P1]], %[[S1]]
// CHECK: scf.if %[[FIRST]] {
// CHECK-NEXT: %[[OLD:.*]] = memref.load %arg1
// CHECK-NEXT: %[[NEW:.*]] = arith.addf %[[OLD]], %[[TOTAL]]
// CHECK-NEXT: memref.store %[[NEW]], %arg1
// CHECK: nvvm.bar.warp.sync
// CHECK-NEXT: scf.if %[[FIRST]] {
// CHECK-NEXT: memref.load %arg1
// CHECK-NEXT: memref.load %arg2
// CHECK-NEXT: arith.addf
// CHECK-NEXT: memref.store %{{.*}}, %arg2
// CHECK: nvvm.bar.warp.sync
// CHECK-DAG: memref.load %arg1
// CHECK-DAG: memref.load %arg2
// CHECK: vector.store
// CHECK: } else {
func.func @kept_fallbacks(%x: memref<8x256xbf16>, %ss: memref<8xf32>, %b: memref<8xf32>, %y: memref<8x256xbf16>) {
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x256xbf16>) outs(%ss : memref<8xf32>) {
  ^bb0(%in: bf16, %acc: f32):
    %f = arith.extf %in : bf16 to f32
    %s = arith.addf %acc, %f : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r) -> (r)>, affine_map<(r) -> (r)>],
                  iterator_types = ["parallel"]}
      ins(%ss : memref<8xf32>) outs(%b : memref<8xf32>) {
  ^bb0(%s: f32, %old: f32):
    %n = arith.addf %s, %old : f32
    linalg.yield %n : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>,
                                   affine_map<(r, c) -> (r)>, affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss, %b : memref<8x256xbf16>, memref<8xf32>, memref<8xf32>) outs(%y : memref<8x256xbf16>) {
  ^bb0(%in: bf16, %s: f32, %bb: f32, %out: bf16):
    %f = arith.extf %in : bf16 to f32
    %d = arith.divf %f, %s : f32
    %e = arith.mulf %d, %bb : f32
    %t = arith.truncf %e : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// Cross-entropy's statistics in one pass (online softmax): the row max of
// the logits, then the sum of exp(x - max) that reads that max, become one
// loop along the row carrying each thread's running max and its sum
// against it (the sum moved by exp(old - new) when the max grows; exactly
// 1 when it does not). Rows of 1000 bf16s loop: 128 threads, 4 chunks of
// 8 per iteration (step 4096); a chunk's start is clamped to the row's
// last 8 (992) so its 16-byte load stays in bounds, and a chunk past the
// row leaves the running values unchanged. Then the block's max, the
// threads' sums moved to it, the max stored; the sum is moved to the max
// the output holds (read back after the barrier) before it is stored.
// CHECK-LABEL: func.func @online_softmax
// CHECK: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c128,
// CHECK: scf.if %{{.*}} -> (f32, f32)
// CHECK: scf.for %{{.*}} = %{{.*}} to %c1000{{.*}} step %c4096{{.*}} iter_args(%[[M:.*]] = %{{.*}}, %[[S:.*]] = %{{.*}}) -> (f32, f32)
// CHECK: vector.load %arg0
// CHECK: %[[IN:.*]] = arith.cmpi ult, %{{.*}}, %c1000
// CHECK: arith.minui %{{.*}}, %c992
// CHECK: vector.load %arg0
// CHECK: vector.load %arg0
// CHECK: vector.load %arg0
// CHECK-NOT: vector.load
// CHECK: %[[GROWN:.*]] = arith.maximumf %[[M]], %{{.*}} : f32
// CHECK: %[[SAME:.*]] = arith.cmpf oeq, %[[M]], %[[GROWN]]
// CHECK: %[[D:.*]] = arith.subf %[[M]], %[[GROWN]]
// CHECK: %[[E:.*]] = math.exp %[[D]]
// CHECK: %[[F:.*]] = arith.select %[[SAME]], %{{.*}}, %[[E]]
// CHECK: arith.mulf %[[S]], %[[F]]
// CHECK: arith.select %[[IN]]
// CHECK: scf.yield
// CHECK: } else {
// CHECK: scf.for
// CHECK: memref.load %arg0
// CHECK: %[[MAX:.*]] = gpu.all_reduce maximumf %{{.*}} uniform
// CHECK: %[[SUM:.*]] = gpu.all_reduce add %{{.*}} uniform
// CHECK: memref.store %{{.*}}, %arg1
// CHECK: gpu.barrier
// CHECK: gpu.barrier
// CHECK: %[[FINAL:.*]] = memref.load %arg1
// CHECK: arith.cmpf oeq, %[[MAX]], %[[FINAL]]
// CHECK: arith.mulf %[[SUM]]
// CHECK: memref.store %{{.*}}, %arg2
// CHECK-NOT: scf.for
// CHECK: math.log
// CHECK: gpu.terminator
func.func @online_softmax(%x: memref<8x1000xbf16>, %max: memref<8xf32>, %sum: memref<8xf32>, %lse: memref<8xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%ninf : f32) outs(%max : memref<8xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x1000xbf16>) outs(%max : memref<8xf32>) {
  ^bb0(%in: bf16, %acc: f32):
    %e = arith.extf %in : bf16 to f32
    %m = arith.maximumf %acc, %e : f32
    linalg.yield %m : f32
  }
  linalg.fill ins(%zero : f32) outs(%sum : memref<8xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>,
                                   affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x, %max : memref<8x1000xbf16>, memref<8xf32>) outs(%sum : memref<8xf32>) {
  ^bb0(%in: bf16, %m: f32, %acc: f32):
    %e = arith.extf %in : bf16 to f32
    %d = arith.subf %e, %m : f32
    %p = math.exp %d : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r) -> (r)>, affine_map<(r) -> (r)>, affine_map<(r) -> (r)>],
                  iterator_types = ["parallel"]}
      ins(%max, %sum : memref<8xf32>, memref<8xf32>) outs(%lse : memref<8xf32>) {
  ^bb0(%m: f32, %s: f32, %o: f32):
    %l = math.log %s : f32
    %r = arith.addf %m, %l : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// The same statistics over rows of 1024 bf16s, which a warp covers in 4
// whole 16-byte steps: no loop, each lane folds its 4 chunks online (the
// logits loaded once, kept for the sum), then xor-shuffle butterflies for
// the max and for the moved sums.
// CHECK-LABEL: func.func @online_softmax_kept
// CHECK-NOT: scf.for
// CHECK-COUNT-4: vector.load %arg0
// CHECK-NOT: vector.load %arg0
// CHECK: gpu.shuffle xor
// CHECK: arith.maximumf
// CHECK: math.exp
// CHECK: gpu.shuffle xor
// CHECK: arith.addf
// CHECK: nvvm.bar.warp.sync
// CHECK: gpu.terminator
func.func @online_softmax_kept(%x: memref<4x1024xbf16>, %max: memref<4xf32>, %sum: memref<4xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%ninf : f32) outs(%max : memref<4xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x1024xbf16>) outs(%max : memref<4xf32>) {
  ^bb0(%in: bf16, %acc: f32):
    %e = arith.extf %in : bf16 to f32
    %m = arith.maximumf %acc, %e : f32
    linalg.yield %m : f32
  }
  linalg.fill ins(%zero : f32) outs(%sum : memref<4xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>,
                                   affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x, %max : memref<4x1024xbf16>, memref<4xf32>) outs(%sum : memref<4xf32>) {
  ^bb0(%in: bf16, %m: f32, %acc: f32):
    %e = arith.extf %in : bf16 to f32
    %d = arith.subf %e, %m : f32
    %p = math.exp %d : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Not one pass: the sum's exponentials are of other values than the max's
// (y against the max of x), so a running max of x would not bound them.
// Two passes along the row, as written: the max's loops, its total, then
// the sum's loops.
// CHECK-LABEL: func.func @softmax_of_other_values
// CHECK: scf.for
// CHECK: gpu.all_reduce maximumf
// CHECK: scf.for
// CHECK: math.exp
// CHECK: gpu.all_reduce add
// CHECK: gpu.terminator
func.func @softmax_of_other_values(%x: memref<8x1000xf32>, %y: memref<8x1000xf32>, %max: memref<8xf32>, %sum: memref<8xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%ninf : f32) outs(%max : memref<8xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x1000xf32>) outs(%max : memref<8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %m = arith.maximumf %acc, %in : f32
    linalg.yield %m : f32
  }
  linalg.fill ins(%zero : f32) outs(%sum : memref<8xf32>)
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>,
                                   affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%y, %max : memref<8x1000xf32>, memref<8xf32>) outs(%sum : memref<8xf32>) {
  ^bb0(%in: f32, %m: f32, %acc: f32):
    %d = arith.subf %in, %m : f32
    %p = math.exp %d : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A norm's backward with its weight gradient's partial sums right before
// it (dc-split-column-reductions puts them there, 16 rows a chunk): one
// kernel, a block per chunk (4 blocks) that runs its 16 rows two at a
// time. The rows' dy, x (16 bytes per thread per chunk, two chunks of a
// 2048-wide row) and rstd (4 bytes) are copied ahead into workgroup
// memory (cp.async), each thread into its own slots of one of two stages:
// the first iteration's before the loop; in each iteration, after its
// first barrier, the next iteration's into the other stage (past the last
// row, copies of no bytes), then a wait for all but those, then this
// stage's slots read (no load of dy, x or rstd from global memory in the
// loop), each shared by the partial sums, the row sum and the scale; a
// barrier between the two rows (the second's block reduction reuses the
// first's shared memory). Each thread adds its 16 columns' partials in
// registers across the rows and stores them at the end, after a wait for
// the last (empty) copies. The partials' zero fill (the identity) and the
// row sum's fill fold away.
// CHECK-LABEL: func.func @norm_backward_folded
// CHECK-NOT: linalg.
// CHECK: gpu.launch blocks(%[[CHUNK:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c4{{.*}}, {{.*}}) threads(%[[TID:[^,]*]], {{.*}}) in (%{{.*}} = %c128{{.*}}, {{.*}}) workgroup(%[[DYS:.*]] : memref<2x2x2x128x8xbf16, 3>, %[[XS:.*]] : memref<2x2x2x128x8xbf16, 3>, %[[RS:.*]] : memref<2x2x1x128x1xf32, 3>)
// CHECK: scf.if
// CHECK: %[[FIRST:.*]] = arith.muli %[[CHUNK]], %c16
// CHECK: nvgpu.device_async_copy %arg0[%[[FIRST]], %{{.*}}], %[[DYS]][%c0{{.*}}, %c0{{.*}}, %c0{{.*}}, %[[TID]], %c0{{.*}}], 8 {bypassL1}
// CHECK: nvgpu.device_async_copy %arg2[%[[FIRST]]], %[[RS]][%c0{{.*}}, %c0{{.*}}, %c0{{.*}}, %[[TID]], %c0{{.*}}], 1 :
// CHECK: nvgpu.device_async_create_group
// CHECK: %[[SUMS:.*]]:16 = scf.for %[[I:.*]] = %c0{{.*}} to %c16{{.*}} step %c2{{.*}} iter_args
// CHECK: gpu.barrier
// CHECK: %[[ITER:.*]] = arith.divui %[[I]], %c2
// CHECK: %[[STAGE:.*]] = arith.remui %[[ITER]], %c2
// CHECK: %[[NEXT:.*]] = arith.addi %[[I]], %c2
// CHECK: %[[MORE:.*]] = arith.cmpi ult, %[[NEXT]], %c16
// CHECK: %[[OTHER:.*]] = arith.subi %c1{{.*}}, %[[STAGE]]
// CHECK: %[[AHEAD:.*]] = arith.select %[[MORE]], %[[NEXT]], %[[I]]
// CHECK: %[[NEXTROW:.*]] = arith.addi %[[FIRST]], %[[AHEAD]]
// CHECK: %[[BYTES:.*]] = arith.select %[[MORE]], %c8{{.*}}, %c0
// CHECK: nvgpu.device_async_copy %arg0[%[[NEXTROW]], %{{.*}}], %[[DYS]][%[[OTHER]], %c0{{.*}}, %c0{{.*}}, %[[TID]], %c0{{.*}}], 8, %[[BYTES]] {bypassL1}
// CHECK-COUNT-7: nvgpu.device_async_copy %arg{{[01]}}[{{.*}}], %{{.*}}[%[[OTHER]],
// CHECK: nvgpu.device_async_copy %arg2[%[[NEXTROW]]], %[[RS]][%[[OTHER]],
// CHECK: nvgpu.device_async_copy %arg2[{{.*}}], %[[RS]][%[[OTHER]],
// CHECK: %[[GROUP:.*]] = nvgpu.device_async_create_group
// CHECK: nvgpu.device_async_wait %[[GROUP]] {numGroups = 1 : i32}
// CHECK: %[[ROW:.*]] = arith.addi %[[FIRST]], %[[I]]
// CHECK-DAG: vector.load %[[DYS]][%[[STAGE]], %c0{{.*}}, %c0{{.*}}, %[[TID]], %c0{{.*}}] : memref<2x2x2x128x8xbf16, 3>, vector<8xbf16>
// CHECK-DAG: vector.load %[[XS]][%[[STAGE]], %c0{{.*}}, %c1{{.*}}, %[[TID]], %c0{{.*}}] : memref<2x2x2x128x8xbf16, 3>, vector<8xbf16>
// CHECK-DAG: memref.load %[[RS]][%[[STAGE]], %c0{{.*}}, %c0{{.*}}, %[[TID]], %c0{{.*}}] : memref<2x2x1x128x1xf32, 3>
// CHECK: %[[I1:.*]] = arith.addi %[[I]], %c1
// CHECK-NEXT: %[[ROW1:.*]] = arith.addi %[[FIRST]], %[[I1]]
// CHECK-DAG: vector.load %[[DYS]][%[[STAGE]], %c1{{.*}}, %c0{{.*}}, %[[TID]], %c0{{.*}}]
// CHECK-DAG: vector.load %[[XS]][%[[STAGE]], %c1{{.*}}, %c1{{.*}}, %[[TID]], %c0{{.*}}]
// CHECK-DAG: memref.load %[[RS]][%[[STAGE]], %c1{{.*}}, %c0{{.*}}, %[[TID]], %c0{{.*}}]
// CHECK-NOT: %arg0[
// CHECK-NOT: %arg1[
// CHECK-NOT: %arg2[
// CHECK-NOT: gpu.barrier
// CHECK: gpu.all_reduce
// CHECK-NOT: %arg0[
// CHECK-NOT: %arg1[
// CHECK-NOT: gpu.barrier
// CHECK: vector.store %{{.*}}, %arg5[%[[ROW]], %{{.*}}]
// CHECK-NOT: vector.load
// CHECK-NOT: memref.load
// CHECK: gpu.barrier
// CHECK-NOT: vector.load
// CHECK-NOT: memref.load
// CHECK-NOT: gpu.barrier
// CHECK: gpu.all_reduce
// CHECK-NOT: gpu.barrier
// CHECK: vector.store %{{.*}}, %arg5[%[[ROW1]], %{{.*}}]
// CHECK-NOT: gpu.barrier
// CHECK: scf.yield
// CHECK: %[[LAST:.*]] = nvgpu.device_async_create_group
// CHECK: nvgpu.device_async_wait %[[LAST]] {numGroups = 0 : i32}
// CHECK: %[[FIRSTSUM:.*]] = arith.addf %{{.*}}, %[[SUMS]]#0 : f32
// CHECK-NEXT: memref.store %[[FIRSTSUM]], %arg6[%[[CHUNK]], %{{.*}}] : memref<4x2048xf32>
// CHECK: %[[LASTSUM:.*]] = arith.addf %{{.*}}, %[[SUMS]]#15 : f32
// CHECK-NEXT: memref.store %[[LASTSUM]], %arg6[%[[CHUNK]], %{{.*}}] : memref<4x2048xf32>
// CHECK: } else {
// CHECK-NOT: nvgpu.
// CHECK: scf.for
// CHECK: gpu.terminator
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @norm_backward_folded(%dy: memref<64x2048xbf16>, %x: memref<64x2048xbf16>, %r: memref<64xf32>,
                                %w: memref<2048xbf16>, %s: memref<64xf32>, %dx: memref<64x2048xbf16>,
                                %part: memref<4x2048xf32>) {
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
  return
}

// -----

// The same, but the scale writes dx over x (in place), which the partial
// sums read: other blocks would overwrite rows it has yet to read, so the
// partial sums keep a kernel of their own (a column reduction, its fill
// folded), then the row group runs a block per row.
// CHECK-LABEL: func.func @norm_backward_not_folded
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %c128{{.*}}, {{.*}}) threads({{.*}}) in (%{{.*}} = %c256{{.*}}, {{.*}}) workgroup
// CHECK: memref.store %{{.*}}, %arg6
// CHECK: gpu.launch blocks({{.*}}) in (%{{.*}} = %c64{{.*}}, {{.*}})
// CHECK-NOT: scf.for
// CHECK: gpu.all_reduce
// CHECK-NOT: gpu.launch
// CHECK: return
func.func @norm_backward_not_folded(%dy: memref<64x2048xbf16>, %x: memref<64x2048xbf16>, %r: memref<64xf32>,
                                    %w: memref<2048xbf16>, %s: memref<64xf32>, %unused: memref<64x2048xbf16>,
                                    %part: memref<4x2048xf32>) {
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
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (c)>,
                                   affine_map<(r, c) -> (r)>, affine_map<(r, c) -> (r)>, affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%dy, %w, %r, %s : memref<64x2048xbf16>, memref<2048xbf16>, memref<64xf32>, memref<64xf32>)
      outs(%x : memref<64x2048xbf16>) {
  ^bb0(%a: bf16, %b: bf16, %d: f32, %e: f32, %c: bf16):
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
  return
}
