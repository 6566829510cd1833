// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-folds-fills-target.json memory-budget=70KiB" --dc-rematerialize="min-bytes=1024" | FileCheck %s

// A recomputed value is not recomputed again. n (cheap) and the product's
// zero fill f (free on a target that folds fills into the product after
// them) are both made just before their one use, the product l. At the
// 80 KiB peak at f, n is recomputed after f; the peak moves to that clone,
// where f is recomputed after it; the peak moves to f's clone. Taking n's
// clone again there would move it after f's clone, and so on until the
// round limit ("did not converge"); k, the expensive product read at the
// end, is recomputed instead, and the step fits 70 KiB. With k recomputed,
// n need not be: the pass gives n's recomputation back (f's clone, free,
// stays).
// CHECK-LABEL: func.func @step
// CHECK: %[[K:.*]] = linalg.matmul
// CHECK: %[[N:.*]] = linalg.generic
// CHECK: linalg.fill
// CHECK-NOT: linalg.generic {{.*}}dc.recompute
// CHECK: %[[F2:.*]] = linalg.fill {{.*}}dc.recompute
// CHECK-NEXT: %[[L:.*]] = linalg.matmul ins(%[[N]], %{{.*}}) outs(%[[F2]] :
// CHECK: %[[K2:.*]] = linalg.matmul {{.*}}dc.recompute
// CHECK: ins(%[[K2]] :
#rc = affine_map<(i, j) -> (i, j)>
#none = affine_map<(i, j) -> ()>
func.func @step(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>) -> (tensor<f32>, tensor<f32>) {
  %zero = arith.constant 0.0 : f32
  %ek = tensor.empty() : tensor<64x64xf32>
  %fk = linalg.fill ins(%zero : f32) outs(%ek : tensor<64x64xf32>) -> tensor<64x64xf32>
  %k = linalg.matmul ins(%x, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%fk : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e = tensor.empty() : tensor<64x64xf32>
  %n = linalg.generic {indexing_maps = [#rc, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %y = math.exp %a : f32
    linalg.yield %y : f32
  } -> tensor<64x64xf32>
  %e1 = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e1 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %l = linalg.matmul ins(%n, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e2 = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e2 : tensor<f32>) -> tensor<f32>
  %s = linalg.generic {indexing_maps = [#rc, #none], iterator_types = ["reduction", "reduction"]}
      ins(%l : tensor<64x64xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %y = arith.addf %a, %o : f32
    linalg.yield %y : f32
  } -> tensor<f32>
  %e3 = tensor.empty() : tensor<f32>
  %z3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<f32>) -> tensor<f32>
  %t = linalg.generic {indexing_maps = [#rc, #none], iterator_types = ["reduction", "reduction"]}
      ins(%k : tensor<64x64xf32>) outs(%z3 : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %y = arith.addf %a, %o : f32
    linalg.yield %y : f32
  } -> tensor<f32>
  return %s, %t : tensor<f32>, tensor<f32>
}
