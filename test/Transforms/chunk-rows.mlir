// RUN: dc-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(func.func(dc-chunk-rows{chunks=2 min-bytes=512}))' | FileCheck %s
// Every product of @head is a candidate at 128 bytes: the two the first
// one's chunking erased are not visited again.
// RUN: dc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(dc-chunk-rows{chunks=2 min-bytes=128}))' 2>/dev/null | FileCheck %s --check-prefix=SMALL
// SMALL-LABEL: func.func @head
// SMALL-COUNT-2: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<4x4xf32>, tensor<4x16xf32>)
// RUN: not dc-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(dc-chunk-rows{chunks=1}))' -o /dev/null 2>&1 | FileCheck %s --check-prefix=ONE

// RUN: not dc-opt %s --split-input-file --dc-zero3-pipeline="world-size=1 row-chunks=-2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGATIVE

// ONE: error: dc-chunk-rows: chunks must be 2 or more, not 1
// NEGATIVE: error: dc-chunk-rows: chunks must be 2 or more, not -2

#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#tok = affine_map<(d0) -> (d0)>
#sum = affine_map<(d0) -> ()>
#ht = affine_map<(d0, d1, d2) -> (d2, d0)>
#g = affine_map<(d0, d1, d2) -> (d2, d1)>
#out = affine_map<(d0, d1, d2) -> (d0, d1)>
#gr = affine_map<(d0, d1, d2) -> (d0, d2)>
#wt = affine_map<(d0, d1, d2) -> (d1, d2)>

// A loss head: logits (8 tokens x 16 words, 512 bytes), their row max, the
// loss summed over tokens (a gather of each target's logit), a gradient
// that also reads its row's index, the head's weight gradient (a sum over
// tokens) and the hidden gradient (a row per row).
// CHECK-LABEL: func.func @head
// CHECK-SAME: %[[H:[^:]+]]: tensor<8x4xf32>, %[[W:[^:]+]]: tensor<4x16xf32>, %[[T:[^:]+]]: tensor<8xi32>
// The weight gradient's init and the assembled hidden gradient first.
// CHECK: %[[DW0:.*]] = linalg.fill {{.*}} -> tensor<4x16xf32>
// CHECK: %[[DH:.*]] = tensor.empty() : tensor<8x4xf32>
// Chunk 0: rows 0-3.
// CHECK: %[[H0:.*]] = tensor.extract_slice %[[H]][0, 0] [4, 4] [1, 1]
// CHECK: %[[L0:.*]] = linalg.matmul ins(%[[H0]], %[[W]] : tensor<4x4xf32>, tensor<4x16xf32>) {{.*}} -> tensor<4x16xf32>
// CHECK: %[[M0:.*]] = linalg.generic {{.*}} ins(%[[L0]] : tensor<4x16xf32>) outs(%{{.*}} : tensor<4xf32>)
// CHECK: %[[T0:.*]] = tensor.extract_slice %[[T]][0] [4] [1]
// CHECK: %[[N0:.*]] = linalg.generic {{.*}} ins(%[[T0]], %[[M0]] : tensor<4xi32>, tensor<4xf32>) outs(%[[NINIT:.*]] : tensor<f32>)
// CHECK: tensor.extract %[[L0]][
// CHECK: %[[G0:.*]] = linalg.generic {{.*}} ins(%[[L0]], %[[M0]] : tensor<4x16xf32>, tensor<4xf32>) outs(%{{.*}} : tensor<4x16xf32>)
// CHECK-NOT: arith.addi
// CHECK: %[[DW1:.*]] = linalg.matmul {{.*}} ins(%{{.*}}, %[[G0]] : tensor<4x4xf32>, tensor<4x16xf32>) outs(%[[DW0]] : tensor<4x16xf32>)
// CHECK: %[[S0:.*]] = tensor.extract_slice %[[DH]][0, 0] [4, 4] [1, 1]
// CHECK: %[[F0:.*]] = linalg.fill {{.*}} outs(%[[S0]] : tensor<4x4xf32>)
// CHECK: %[[R0:.*]] = linalg.matmul {{.*}} ins(%[[G0]], %[[W]] : tensor<4x16xf32>, tensor<4x16xf32>) outs(%[[F0]] : tensor<4x4xf32>)
// CHECK: %[[DH0:.*]] = tensor.insert_slice %[[R0]] into %[[DH]][0, 0] [4, 4] [1, 1]
// Chunk 1: rows 4-7; the sums go on from chunk 0's.
// CHECK: %[[H1:.*]] = tensor.extract_slice %[[H]][4, 0] [4, 4] [1, 1]
// CHECK: %[[L1:.*]] = linalg.matmul ins(%[[H1]], %[[W]]
// CHECK: %[[T1:.*]] = tensor.extract_slice %[[T]][4] [4] [1]
// CHECK: %[[N1:.*]] = linalg.generic {{.*}} outs(%[[N0]] : tensor<f32>)
// The gather picks a row of the chunk's logits: the row index as it is.
// CHECK: %[[ROW:.*]] = linalg.index 0 : index
// CHECK-NOT: arith.addi
// CHECK: tensor.extract %[[L1]][%[[ROW]],
// Elsewhere the row index is the whole tensor's: offset by 4.
// CHECK: linalg.generic {{.*}} ins(%[[L1]],
// CHECK: %[[I:.*]] = linalg.index 0 : index
// CHECK: %[[FOUR:.*]] = arith.constant 4 : index
// CHECK: arith.addi %[[I]], %[[FOUR]] : index
// CHECK: %[[DW2:.*]] = linalg.matmul {{.*}} outs(%[[DW1]] : tensor<4x16xf32>)
// CHECK: tensor.extract_slice %[[DH0]][4, 0] [4, 4] [1, 1]
// CHECK: %[[DH1:.*]] = tensor.insert_slice %{{.*}} into %[[DH0]][4, 0] [4, 4] [1, 1]
// CHECK: %[[LOSS:.*]] = linalg.generic {{.*}} ins(%[[N1]] : tensor<f32>)
// CHECK-NOT: tensor<8x16xf32>
// CHECK: return %[[LOSS]], %[[DW2]], %[[DH1]]

func.func @head(%h: tensor<8x4xf32>, %w: tensor<4x16xf32>,
                %targets: tensor<8xi32>)
    -> (tensor<f32>, tensor<4x16xf32>, tensor<8x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %half = arith.constant 0.5 : f32
  %e0 = tensor.empty() : tensor<8x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %logits = linalg.matmul ins(%h, %w : tensor<8x4xf32>, tensor<4x16xf32>)
                          outs(%f0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %max = linalg.generic {indexing_maps = [#rows, #row],
                         iterator_types = ["parallel", "reduction"]}
      ins(%logits : tensor<8x16xf32>) outs(%f1 : tensor<8xf32>) {
  ^bb0(%x: f32, %m: f32):
    %r = arith.maximumf %m, %x : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %es = tensor.empty() : tensor<f32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<f32>) -> tensor<f32>
  %nll = linalg.generic {indexing_maps = [#tok, #tok, #sum],
                         iterator_types = ["reduction"]}
      ins(%targets, %max : tensor<8xi32>, tensor<8xf32>) outs(%fs : tensor<f32>) {
  ^bb0(%t: i32, %m: f32, %acc: f32):
    %col = arith.index_cast %t : i32 to index
    %row = linalg.index 0 : index
    %x = tensor.extract %logits[%row, %col] : tensor<8x16xf32>
    %d = arith.subf %m, %x : f32
    %s = arith.addf %acc, %d : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %el = tensor.empty() : tensor<f32>
  %loss = linalg.generic {indexing_maps = [affine_map<() -> ()>, affine_map<() -> ()>],
                          iterator_types = []}
      ins(%nll : tensor<f32>) outs(%el : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.mulf %a, %half : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %grad = linalg.generic {indexing_maps = [#rows, #row, #rows],
                          iterator_types = ["parallel", "parallel"]}
      ins(%logits, %max : tensor<8x16xf32>, tensor<8xf32>) outs(%e2 : tensor<8x16xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %i = linalg.index 0 : index
    %ii = arith.index_cast %i : index to i32
    %fi = arith.sitofp %ii : i32 to f32
    %y = arith.subf %x, %m : f32
    %z = arith.addf %y, %fi : f32
    linalg.yield %z : f32
  } -> tensor<8x16xf32>
  %e3 = tensor.empty() : tensor<4x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %dw = linalg.matmul indexing_maps = [#ht, #g, #out]
      ins(%h, %grad : tensor<8x4xf32>, tensor<8x16xf32>)
      outs(%f3 : tensor<4x16xf32>) -> tensor<4x16xf32>
  %e4 = tensor.empty() : tensor<8x4xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<8x4xf32>) -> tensor<8x4xf32>
  %dh = linalg.matmul indexing_maps = [#gr, #wt, #out]
      ins(%grad, %w : tensor<8x16xf32>, tensor<4x16xf32>)
      outs(%f4 : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %loss, %dw, %dh : tensor<f32>, tensor<4x16xf32>, tensor<8x4xf32>
}

// -----

#rows = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// The logits are returned: they would be whole again, nothing is chunked.
// CHECK-LABEL: func.func @returned
// CHECK: linalg.matmul {{.*}} -> tensor<8x16xf32>
// CHECK-NOT: tensor.extract_slice
func.func @returned(%h: tensor<8x4xf32>, %w: tensor<4x16xf32>)
    -> (tensor<8x16xf32>, tensor<8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<8x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  // expected-remark@+1 {{a wide value would be assembled whole again for an op that is not chunkable on its rows}}
  %logits = linalg.matmul ins(%h, %w : tensor<8x4xf32>, tensor<4x16xf32>)
                          outs(%f0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %sum = linalg.generic {indexing_maps = [#rows, #row],
                         iterator_types = ["parallel", "reduction"]}
      ins(%logits : tensor<8x16xf32>) outs(%f1 : tensor<8xf32>) {
  ^bb0(%x: f32, %s: f32):
    %r = arith.addf %s, %x : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  // expected-note@+1 {{that op}}
  return %logits, %sum : tensor<8x16xf32>, tensor<8xf32>
}

// -----

// A frontend's views of a per-row value as [T, 1] keep the rows: they are
// chunked with the ops around them.
// CHECK-LABEL: func.func @row_views
// CHECK-NOT: linalg.matmul {{.*}} -> tensor<8x16xf32>
// CHECK: %[[L0:.*]] = linalg.matmul {{.*}} -> tensor<4x16xf32>
// CHECK: %[[M0:.*]] = linalg.generic {{.*}} ins(%[[L0]] : tensor<4x16xf32>)
// CHECK: %[[V0:.*]] = tensor.expand_shape %[[M0]] {{\[\[}}0, 1]] output_shape [4, 1] : tensor<4xf32> into tensor<4x1xf32>
// CHECK: linalg.generic {{.*}} ins(%[[L0]], %[[V0]] : tensor<4x16xf32>, tensor<4x1xf32>)
// CHECK: linalg.matmul {{.*}} -> tensor<4x16xf32>
// CHECK: tensor.expand_shape {{.*}} : tensor<4xf32> into tensor<4x1xf32>
// CHECK-NOT: linalg.matmul
// The broadcast after the chunks reads the assembled row values.
// CHECK: %[[ALL:.*]] = tensor.expand_shape %{{.*}} {{\[\[}}0, 1]] output_shape [8, 1] : tensor<8xf32> into tensor<8x1xf32>
// CHECK: linalg.generic {{.*}} ins(%[[ALL]] : tensor<8x1xf32>)
// CHECK: return
func.func @row_views(%h: tensor<8x4xf32>, %w: tensor<4x16xf32>)
    -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<8x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %logits = linalg.matmul ins(%h, %w : tensor<8x4xf32>, tensor<4x16xf32>)
                          outs(%f0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<8xf32>) -> tensor<8xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                         iterator_types = ["parallel", "reduction"]}
      ins(%logits : tensor<8x16xf32>) outs(%f1 : tensor<8xf32>) {
  ^bb0(%x: f32, %m: f32):
    %r = arith.maximumf %m, %x : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %view = tensor.expand_shape %max [[0, 1]] output_shape [8, 1] : tensor<8xf32> into tensor<8x1xf32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>],
                         iterator_types = ["parallel", "parallel"]}
      ins(%logits, %view : tensor<8x16xf32>, tensor<8x1xf32>) outs(%e2 : tensor<8x16xf32>) {
  ^bb0(%x: f32, %m: f32, %o: f32):
    %r = arith.subf %x, %m : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %e3 = tensor.empty() : tensor<8xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<8xf32>) -> tensor<8xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                         iterator_types = ["parallel", "reduction"]}
      ins(%sub : tensor<8x16xf32>) outs(%f3 : tensor<8xf32>) {
  ^bb0(%x: f32, %s: f32):
    %r = arith.addf %s, %x : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %e4 = tensor.empty() : tensor<8x4xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<8x4xf32>) -> tensor<8x4xf32>
  // The row sums leave as [8]: assembled; the [8, 16] result never is.
  %e5 = tensor.empty() : tensor<8x16xf32>
  %scaled = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>],
                            iterator_types = ["parallel", "parallel"]}
      ins(%sub, %sum : tensor<8x16xf32>, tensor<8xf32>) outs(%e5 : tensor<8x16xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %r = arith.mulf %x, %s : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %e6 = tensor.empty() : tensor<8xf32>
  %f6 = linalg.fill ins(%zero : f32) outs(%e6 : tensor<8xf32>) -> tensor<8xf32>
  %out = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                         iterator_types = ["parallel", "reduction"]}
      ins(%scaled : tensor<8x16xf32>) outs(%f6 : tensor<8xf32>) {
  ^bb0(%x: f32, %s: f32):
    %r = arith.addf %s, %x : f32
    linalg.yield %r : f32
  } -> tensor<8xf32>
  %wide = tensor.expand_shape %out [[0, 1]] output_shape [8, 1] : tensor<8xf32> into tensor<8x1xf32>
  %e7 = tensor.empty() : tensor<8x16xf32>
  %bcast = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>],
                           iterator_types = ["parallel", "parallel"]}
      ins(%wide : tensor<8x1xf32>) outs(%e7 : tensor<8x16xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  } -> tensor<8x16xf32>
  return %bcast : tensor<8x16xf32>
}

// -----

// PyTorch's mean loss with an ignore index: one reduction sums the target
// logits and counts the counted tokens, and the one-hot gradient reads the
// count. The count reads only the targets: it is split off and made before
// the chunks; the one-hot gradient, made from the targets row by row, is
// made in the chunks.
// CHECK-LABEL: func.func @ignore_index
// CHECK: %[[COUNT:.*]] = linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[TARGETS:[^ ]*]] : tensor<8xi32>) outs(%{{.*}} : tensor<f32>)
// CHECK: arith.cmpi ne
// CHECK-NOT: tensor.extract
// CHECK: linalg.yield
// CHECK: linalg.matmul {{.*}} -> tensor<4x16xf32>
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<4xi32>) outs(%{{.*}} : tensor<f32>)
// CHECK: tensor.extract
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %[[COUNT]] : tensor<4xi32>, tensor<f32>) outs(%{{.*}} : tensor<4x16xf32>)
// CHECK: linalg.matmul {{.*}} -> tensor<4x16xf32>
// CHECK-NOT: tensor.empty() : tensor<8x16xf32>
// CHECK: return
func.func @ignore_index(%h: tensor<8x4xf32>, %w: tensor<4x16xf32>,
                        %targets: tensor<8xi32>)
    -> (tensor<f32>, tensor<f32>, tensor<8x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<8x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %logits = linalg.matmul ins(%h, %w : tensor<8x4xf32>, tensor<4x16xf32>)
                          outs(%f0 : tensor<8x16xf32>) -> tensor<8x16xf32>
  %es = tensor.empty() : tensor<f32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<f32>) -> tensor<f32>
  %ec = tensor.empty() : tensor<f32>
  %fc = linalg.fill ins(%zero : f32) outs(%ec : tensor<f32>) -> tensor<f32>
  %nll:2 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>, affine_map<(d0) -> ()>],
                           iterator_types = ["reduction"]}
      ins(%targets : tensor<8xi32>) outs(%fs, %fc : tensor<f32>, tensor<f32>) {
  ^bb0(%t: i32, %sum: f32, %count: f32):
    %ignore = arith.constant -1 : i32
    %counted = arith.cmpi ne, %t, %ignore : i32
    %zi = arith.constant 0 : i32
    %col_i = arith.select %counted, %t, %zi : i32
    %col = arith.index_cast %col_i : i32 to index
    %row = linalg.index 0 : index
    %x = tensor.extract %logits[%row, %col] : tensor<8x16xf32>
    %z = arith.constant 0.0 : f32
    %one = arith.constant 1.0 : f32
    %term = arith.select %counted, %x, %z : f32
    %weight = arith.select %counted, %one, %z : f32
    %s = arith.addf %sum, %term : f32
    %c = arith.addf %count, %weight : f32
    linalg.yield %s, %c : f32, f32
  } -> (tensor<f32>, tensor<f32>)
  %e1 = tensor.empty() : tensor<8x16xf32>
  %onehot = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>],
                            iterator_types = ["parallel", "parallel"]}
      ins(%targets, %nll#1 : tensor<8xi32>, tensor<f32>) outs(%e1 : tensor<8x16xf32>) {
  ^bb0(%t: i32, %count: f32, %o: f32):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i32
    %hit = arith.cmpi eq, %t, %ji : i32
    %z = arith.constant 0.0 : f32
    %g = arith.divf %z, %count : f32
    %r = arith.select %hit, %g, %z : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %e2 = tensor.empty() : tensor<8x16xf32>
  %grad = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                          iterator_types = ["parallel", "parallel"]}
      ins(%logits, %onehot : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e2 : tensor<8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %r = arith.addf %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<8x16xf32>
  %e4 = tensor.empty() : tensor<8x4xf32>
  %f4 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<8x4xf32>) -> tensor<8x4xf32>
  %dh = linalg.matmul indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>]
      ins(%grad, %w : tensor<8x16xf32>, tensor<4x16xf32>)
      outs(%f4 : tensor<8x4xf32>) -> tensor<8x4xf32>
  return %nll#0, %nll#1, %dh : tensor<f32>, tensor<f32>, tensor<8x4xf32>
}

// -----

// Rows that do not divide into the chunks: nothing is chunked.
// CHECK-LABEL: func.func @odd_rows
// CHECK-NOT: tensor.extract_slice
func.func @odd_rows(%h: tensor<9x4xf32>, %w: tensor<4x16xf32>) -> tensor<9xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<9x16xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<9x16xf32>) -> tensor<9x16xf32>
  // expected-remark@+1 {{9 rows do not divide into 2 chunks; not chunked}}
  %p = linalg.matmul ins(%h, %w : tensor<9x4xf32>, tensor<4x16xf32>)
                     outs(%f0 : tensor<9x16xf32>) -> tensor<9x16xf32>
  %e1 = tensor.empty() : tensor<9xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<9xf32>) -> tensor<9xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                         iterator_types = ["parallel", "reduction"]}
      ins(%p : tensor<9x16xf32>) outs(%f1 : tensor<9xf32>) {
  ^bb0(%x: f32, %s: f32):
    %r = arith.addf %s, %x : f32
    linalg.yield %r : f32
  } -> tensor<9xf32>
  return %sum : tensor<9xf32>
}

// -----

// A product under min-bytes (256 bytes) is left alone, without a remark.
// CHECK-LABEL: func.func @small
// CHECK-NOT: tensor.extract_slice
func.func @small(%h: tensor<8x4xf32>, %w: tensor<4x8xf32>) -> tensor<8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<8x8xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<8x8xf32>) -> tensor<8x8xf32>
  %p = linalg.matmul ins(%h, %w : tensor<8x4xf32>, tensor<4x8xf32>)
                     outs(%f0 : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %p : tensor<8x8xf32>
}
