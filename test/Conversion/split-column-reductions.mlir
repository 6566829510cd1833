// RUN: dc-opt %s --pass-pipeline='builtin.module(func.func(dc-split-column-reductions))' | FileCheck %s
// RUN: dc-opt %s --pass-pipeline='builtin.module(func.func(dc-split-column-reductions{max-chunks=4}))' | FileCheck %s --check-prefix=FOUR
// RUN: dc-opt %s --pass-pipeline='builtin.module(func.func(dc-split-column-reductions{folded-chunk-rows=16}))' | FileCheck %s --check-prefix=ROWS16
// RUN: not dc-opt %s --pass-pipeline='builtin.module(func.func(dc-split-column-reductions{folded-chunk-rows=65}))' 2>&1 | FileCheck %s --check-prefix=ROWS65
// The default min-blocks is two per multiprocessor of the module's target:
// 16 for a GPU of 8.
// RUN: echo '{"base": "h200", "name": "gpu-of-8", "multiprocessors": 8}' > %t.json
// RUN: dc-opt %s --pass-pipeline='builtin.module(dc-attach-target{target=%t.json},func.func(dc-split-column-reductions))' | FileCheck %s --check-prefix=FEW
// RUN: not dc-opt %s --pass-pipeline='builtin.module(func.func(dc-split-column-reductions{min-blocks=-1}))' 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// NEGATIVE: dc-split-column-reductions: min-blocks must be at least 0, got -1

#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>

// A norm's weight gradient, 8192 rows x 2048 columns: 32 blocks of 64
// columns, fewer than 264, so its rows fall into 32 chunks of 256 rows
// (contiguous: the chunk is the outer dim of each expanded input), folded
// into a 32 x 2048 partial from the combiner's identity, then the chunks'
// partials into the original output, in order.
// CHECK-DAG: #[[IN3:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[ROW3:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[PART3:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @norm_weight_grad
// CHECK-SAME: (%[[DY:.*]]: tensor<8192x2048xbf16>, %[[X:.*]]: tensor<8192x2048xbf16>, %[[R:.*]]: tensor<8192xf32>)
// CHECK: %[[OUT:.*]] = linalg.fill {{.*}} -> tensor<2048xf32>
// CHECK-DAG: %[[DY3:.*]] = tensor.expand_shape %[[DY]] {{\[\[}}0, 1], [2]] output_shape [32, 256, 2048]
// CHECK-DAG: %[[X3:.*]] = tensor.expand_shape %[[X]] {{\[\[}}0, 1], [2]] output_shape [32, 256, 2048]
// CHECK-DAG: %[[R2:.*]] = tensor.expand_shape %[[R]] {{\[\[}}0, 1]] output_shape [32, 256]
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[PART0:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<32x2048xf32>)
// CHECK: %[[PART:.*]] = linalg.generic {indexing_maps = [#[[IN3]], #[[IN3]], #[[ROW3]], #[[PART3]]], iterator_types = ["parallel", "reduction", "parallel"]}
// CHECK-SAME: ins(%[[DY3]], %[[X3]], %[[R2]] : {{.*}}) outs(%[[PART0]] : tensor<32x2048xf32>)
// CHECK: arith.addf
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%[[PART]] : tensor<32x2048xf32>) outs(%[[OUT]] : tensor<2048xf32>)
// CHECK: arith.addf
// CHECK: return %[[SUM]]
// On a GPU of 8 multiprocessors its 32 blocks are enough: it stays whole.
// FEW-LABEL: func.func @norm_weight_grad
// FEW-NOT: tensor.expand_shape
// FEW: linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%arg0, %arg1, %arg2 : {{.*}}) outs(%{{.*}} : tensor<2048xf32>)
// FEW-NOT: linalg.generic
// FEW: return
// At most 4 chunks (of 2048 rows) with max-chunks=4.
// FOUR-LABEL: func.func @norm_weight_grad
// FOUR: tensor.expand_shape {{.*}} output_shape [4, 2048, 2048]
// FOUR: linalg.generic {{.*}} outs(%{{.*}} : tensor<4x2048xf32>)
func.func @norm_weight_grad(%dy: tensor<8192x2048xbf16>, %x: tensor<8192x2048xbf16>, %r: tensor<8192xf32>) -> tensor<2048xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<2048xf32>
  %out = linalg.fill ins(%zero : f32) outs(%empty : tensor<2048xf32>) -> tensor<2048xf32>
  %sum = linalg.generic {indexing_maps = [#rows, #rows, #row, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy, %x, %r : tensor<8192x2048xbf16>, tensor<8192x2048xbf16>, tensor<8192xf32>) outs(%out : tensor<2048xf32>) {
  ^bb0(%a: bf16, %b: bf16, %c: f32, %acc: f32):
    %0 = arith.extf %a : bf16 to f32
    %1 = arith.extf %b : bf16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.mulf %2, %c : f32
    %4 = arith.addf %acc, %3 : f32
    linalg.yield %4 : f32
  } -> tensor<2048xf32>
  return %sum : tensor<2048xf32>
}

// A maximum splits too: the partial starts from the combiner's identity
// (-inf), not zero.
// CHECK-LABEL: func.func @column_max
// One block of 64 columns is too few there too.
// FEW-LABEL: func.func @column_max
// FEW: linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<16x64xf32>)
// CHECK: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: linalg.fill ins(%[[NEGINF]] : f32) outs(%{{.*}} : tensor<16x64xf32>)
// CHECK: arith.maximumf
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<16x64xf32>)
// CHECK: arith.maximumf
func.func @column_max(%x: tensor<4096x64xf32>, %out: tensor<64xf32>) -> tensor<64xf32> {
  %max = linalg.generic {indexing_maps = [#rows, #col], iterator_types = ["reduction", "parallel"]}
      ins(%x : tensor<4096x64xf32>) outs(%out : tensor<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %0 = arith.maximumf %acc, %a : f32
    linalg.yield %0 : f32
  } -> tensor<64xf32>
  return %max : tensor<64xf32>
}

// Left whole: a row reduction (a block per row already), a column
// reduction with columns enough for 264 blocks, one whose rows a power of
// two does not divide into chunks of 256, and one too short to split.
// CHECK-LABEL: func.func @left_whole
// CHECK-NOT: tensor.expand_shape
// CHECK-COUNT-4: linalg.generic
// CHECK-NOT: tensor.expand_shape
// CHECK: return
func.func @left_whole(%rows_in: tensor<8192x2048xf32>, %per_row: tensor<8192xf32>,
                      %wide: tensor<4096x20480xf32>, %wide_out: tensor<20480xf32>,
                      %odd: tensor<4097x64xf32>, %short: tensor<256x64xf32>,
                      %narrow_out: tensor<64xf32>)
    -> (tensor<8192xf32>, tensor<20480xf32>, tensor<64xf32>, tensor<64xf32>) {
  %0 = linalg.generic {indexing_maps = [#rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%rows_in : tensor<8192x2048xf32>) outs(%per_row : tensor<8192xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<8192xf32>
  %1 = linalg.generic {indexing_maps = [#rows, #col], iterator_types = ["reduction", "parallel"]}
      ins(%wide : tensor<4096x20480xf32>) outs(%wide_out : tensor<20480xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<20480xf32>
  %2 = linalg.generic {indexing_maps = [#rows, #col], iterator_types = ["reduction", "parallel"]}
      ins(%odd : tensor<4097x64xf32>) outs(%narrow_out : tensor<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %3 = linalg.generic {indexing_maps = [#rows, #col], iterator_types = ["reduction", "parallel"]}
      ins(%short : tensor<256x64xf32>) outs(%narrow_out : tensor<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  return %0, %1, %2, %3 : tensor<8192xf32>, tensor<20480xf32>, tensor<64xf32>, tensor<64xf32>
}

// A norm's backward: the weight gradient reads dy and x at the points the
// row sum before it reads them. Its rows fall into 256 chunks of 32 (not
// 32 of 256), and the partial sums (their views and their fill) move right
// before the row sum's fill, so that dc-map-to-gpu computes them in the
// row group's blocks; the reduction of the 256 partial rows stays where
// the first was, one op (dc-map-to-gpu gives it narrow blocks).
// CHECK-LABEL: func.func @norm_backward
// CHECK-SAME: (%[[DY:.*]]: tensor<8192x2048xbf16>, %[[X:.*]]: tensor<8192x2048xbf16>, %[[R:.*]]: tensor<8192xf32>, %[[W:.*]]: tensor<2048xbf16>)
// CHECK: %[[DY3:.*]] = tensor.expand_shape %[[DY]] {{\[\[}}0, 1], [2]] output_shape [256, 32, 2048]
// CHECK: %[[PART0:.*]] = linalg.fill {{.*}} -> tensor<256x2048xf32>
// CHECK: %[[PART:.*]] = linalg.generic {{.*}} ins(%[[DY3]], %{{.*}}, %{{.*}} : {{.*}}) outs(%[[PART0]] : tensor<256x2048xf32>)
// CHECK: } -> tensor<256x2048xf32>
// CHECK-NEXT: %[[ZERO:.*]] = linalg.fill {{.*}} -> tensor<8192xf32>
// CHECK-NEXT: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[DY]], %[[W]], %[[X]], %[[R]] : {{.*}}) outs(%[[ZERO]] : tensor<8192xf32>)
// CHECK: %[[DW0:.*]] = linalg.fill {{.*}} -> tensor<2048xf32>
// CHECK-NOT: tensor.expand_shape %[[PART]]
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%[[PART]] : tensor<256x2048xf32>) outs(%[[DW0]] : tensor<2048xf32>)
// CHECK-NOT: linalg.generic
// folded-chunk-rows=16: the folded weight gradient in 512 chunks of 16
// rows; the unfolded ones keep their chunks.
// ROWS16-LABEL: func.func @norm_backward
// ROWS16: tensor.expand_shape %{{.*}} {{\[\[}}0, 1], [2]] output_shape [512, 16, 2048]
// ROWS16: linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%{{.*}} : tensor<512x2048xf32>)
// ROWS16-LABEL: func.func @norm_backward_late_input
// ROWS16: tensor.expand_shape {{.*}} output_shape [32, 256, 2048]
// ROWS65: error: dc-split-column-reductions: folded-chunk-rows must be 1 to 64, got 65
// A weight gradient whose input is computed after the row sum stays in
// place, in the usual 32 chunks.
// CHECK-LABEL: func.func @norm_backward_late_input
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]}
// CHECK: tensor.expand_shape {{.*}} output_shape [32, 256, 2048]
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<32x2048xf32>)
#bcol = affine_map<(d0, d1) -> (d1)>
#vec = affine_map<(d0) -> (d0)>
func.func @norm_backward(%dy: tensor<8192x2048xbf16>, %x: tensor<8192x2048xbf16>, %r: tensor<8192xf32>, %w: tensor<2048xbf16>)
    -> (tensor<8192xf32>, tensor<2048xf32>) {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<8192xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%empty : tensor<8192xf32>) -> tensor<8192xf32>
  %s = linalg.generic {indexing_maps = [#rows, #bcol, #rows, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%dy, %w, %x, %r : tensor<8192x2048xbf16>, tensor<2048xbf16>, tensor<8192x2048xbf16>, tensor<8192xf32>) outs(%s0 : tensor<8192xf32>) {
  ^bb0(%a: bf16, %b: bf16, %c: bf16, %d: f32, %acc: f32):
    %0 = arith.extf %a : bf16 to f32
    %1 = arith.extf %b : bf16 to f32
    %2 = arith.mulf %0, %1 : f32
    %3 = arith.extf %c : bf16 to f32
    %4 = arith.mulf %3, %d : f32
    %5 = arith.mulf %2, %4 : f32
    %6 = arith.addf %acc, %5 : f32
    linalg.yield %6 : f32
  } -> tensor<8192xf32>
  %dempty = tensor.empty() : tensor<2048xf32>
  %dw0 = linalg.fill ins(%zero : f32) outs(%dempty : tensor<2048xf32>) -> tensor<2048xf32>
  %dw = linalg.generic {indexing_maps = [#rows, #rows, #row, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy, %x, %r : tensor<8192x2048xbf16>, tensor<8192x2048xbf16>, tensor<8192xf32>) outs(%dw0 : tensor<2048xf32>) {
  ^bb0(%a: bf16, %b: bf16, %c: f32, %acc: f32):
    %0 = arith.extf %a : bf16 to f32
    %1 = arith.extf %b : bf16 to f32
    %2 = arith.mulf %1, %c : f32
    %3 = arith.mulf %0, %2 : f32
    %4 = arith.addf %acc, %3 : f32
    linalg.yield %4 : f32
  } -> tensor<2048xf32>
  return %s, %dw : tensor<8192xf32>, tensor<2048xf32>
}

func.func @norm_backward_late_input(%dy: tensor<8192x2048xbf16>, %x: tensor<8192x2048xbf16>, %r: tensor<8192xf32>)
    -> (tensor<8192xf32>, tensor<2048xf32>) {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<8192xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%empty : tensor<8192xf32>) -> tensor<8192xf32>
  %s = linalg.generic {indexing_maps = [#rows, #rows, #row], iterator_types = ["parallel", "reduction"]}
      ins(%dy, %x : tensor<8192x2048xbf16>, tensor<8192x2048xbf16>) outs(%s0 : tensor<8192xf32>) {
  ^bb0(%a: bf16, %c: bf16, %acc: f32):
    %0 = arith.extf %a : bf16 to f32
    %3 = arith.extf %c : bf16 to f32
    %5 = arith.mulf %0, %3 : f32
    %6 = arith.addf %acc, %5 : f32
    linalg.yield %6 : f32
  } -> tensor<8192xf32>
  // The row scale the weight gradient reads comes after the row sum.
  %rempty = tensor.empty() : tensor<8192xf32>
  %late = linalg.generic {indexing_maps = [#vec, #vec, #vec], iterator_types = ["parallel"]}
      ins(%r, %s : tensor<8192xf32>, tensor<8192xf32>) outs(%rempty : tensor<8192xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.mulf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<8192xf32>
  %dempty = tensor.empty() : tensor<2048xf32>
  %dw0 = linalg.fill ins(%zero : f32) outs(%dempty : tensor<2048xf32>) -> tensor<2048xf32>
  %dw = linalg.generic {indexing_maps = [#rows, #rows, #row, #col], iterator_types = ["reduction", "parallel"]}
      ins(%dy, %x, %late : tensor<8192x2048xbf16>, tensor<8192x2048xbf16>, tensor<8192xf32>) outs(%dw0 : tensor<2048xf32>) {
  ^bb0(%a: bf16, %b: bf16, %c: f32, %acc: f32):
    %0 = arith.extf %a : bf16 to f32
    %1 = arith.extf %b : bf16 to f32
    %2 = arith.mulf %1, %c : f32
    %3 = arith.mulf %0, %2 : f32
    %4 = arith.addf %acc, %3 : f32
    linalg.yield %4 : f32
  } -> tensor<2048xf32>
  return %s, %dw : tensor<8192xf32>, tensor<2048xf32>
}
