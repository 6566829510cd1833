// RUN: dc-opt %s --split-input-file --dc-in-place-at-peak | FileCheck %s
// The peak falls from 104.25 KiB (the logits l and their exponentials g
// side by side) to 80 KiB (at the last product's fill, g and the returned dx
// live): the memory timeline counts g in l's buffer.
// RUN: not dc-opt %s --split-input-file --dc-attach-target=memory-budget=100KiB --dc-verify-schedule -o /dev/null 2>&1 | FileCheck %s --check-prefix=BEFORE
// RUN: dc-opt %s --split-input-file --dc-in-place-at-peak --dc-attach-target=memory-budget=100KiB --dc-verify-schedule -o /dev/null
// RUN: not dc-opt %s --split-input-file --dc-in-place-at-peak --dc-attach-target=memory-budget=70KiB --dc-verify-schedule -o /dev/null 2>&1 | FileCheck %s --check-prefix=AFTER

// A softmax-style gradient at the peak: g reads l at the points it writes,
// and nothing reads l after it, so l becomes g's init (the body reads the
// output's element) and the shape-only tensor.empty goes.
// CHECK-LABEL: func.func @at_peak
// CHECK: %[[L:.*]] = linalg.matmul
// CHECK: %[[M:.*]] = linalg.generic {{.*}} ins(%[[L]] : tensor<64x128xf32>)
// CHECK-NOT: tensor.empty() : tensor<64x128xf32>
// CHECK: %[[G:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%[[M]] : tensor<64xf32>) outs(%[[L]] : tensor<64x128xf32>)
// CHECK-NEXT: ^bb0(%[[MAX:.*]]: f32, %[[OUT:.*]]: f32):
// CHECK-NEXT: arith.subf %[[OUT]], %[[MAX]]
// CHECK: linalg.matmul ins(%[[G]], %{{.*}} : tensor<64x128xf32>, tensor<128x32xf32>)
// BEFORE: error: device memory peaks here at 104.25 KiB
// BEFORE-NEXT: %g = linalg.generic
// AFTER: error: device memory peaks here at 80.00 KiB
// AFTER-NEXT: %f3 = linalg.fill
#rc = affine_map<(i, j) -> (i, j)>
#r = affine_map<(i, j) -> (i)>
func.func @at_peak(%x: tensor<64x32xf32>, %w: tensor<32x128xf32>, %wt: tensor<128x32xf32>) -> tensor<64x32xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<64x128xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<64x128xf32>) -> tensor<64x128xf32>
  %l = linalg.matmul ins(%x, %w : tensor<64x32xf32>, tensor<32x128xf32>) outs(%f0 : tensor<64x128xf32>) -> tensor<64x128xf32>
  %e1 = tensor.empty() : tensor<64xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<64xf32>) -> tensor<64xf32>
  %m = linalg.generic {indexing_maps = [#rc, #r], iterator_types = ["parallel", "reduction"]}
      ins(%l : tensor<64x128xf32>) outs(%f1 : tensor<64xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.maximumf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %e2 = tensor.empty() : tensor<64x128xf32>
  %g = linalg.generic {indexing_maps = [#rc, #r, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%l, %m : tensor<64x128xf32>, tensor<64xf32>) outs(%e2 : tensor<64x128xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %x2 = math.exp %d : f32
    linalg.yield %x2 : f32
  } -> tensor<64x128xf32>
  %e3 = tensor.empty() : tensor<64x32xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<64x32xf32>) -> tensor<64x32xf32>
  %dx = linalg.matmul ins(%g, %wt : tensor<64x128xf32>, tensor<128x32xf32>) outs(%f3 : tensor<64x32xf32>) -> tensor<64x32xf32>
  return %dx : tensor<64x32xf32>
}

// -----

// l is read again after g (returned): writing g over it would need a copy.
// CHECK-LABEL: func.func @read_after
// CHECK: linalg.matmul
// CHECK-NEXT: %[[E:.*]] = tensor.empty() : tensor<64x128xf32>
// CHECK: linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<64x128xf32>, tensor<64xf32>) outs(%[[E]] : tensor<64x128xf32>)
#rc = affine_map<(i, j) -> (i, j)>
#r = affine_map<(i, j) -> (i)>
func.func @read_after(%x: tensor<64x32xf32>, %w: tensor<32x128xf32>, %m: tensor<64xf32>) -> (tensor<64x128xf32>, tensor<64x128xf32>) {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<64x128xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<64x128xf32>) -> tensor<64x128xf32>
  %l = linalg.matmul ins(%x, %w : tensor<64x32xf32>, tensor<32x128xf32>) outs(%f0 : tensor<64x128xf32>) -> tensor<64x128xf32>
  %e2 = tensor.empty() : tensor<64x128xf32>
  %g = linalg.generic {indexing_maps = [#rc, #r, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%l, %m : tensor<64x128xf32>, tensor<64xf32>) outs(%e2 : tensor<64x128xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<64x128xf32>
  return %g, %l : tensor<64x128xf32>, tensor<64x128xf32>
}

// -----

// The input is an argument: the caller's buffer is never written.
// CHECK-LABEL: func.func @argument
// CHECK: %[[E:.*]] = tensor.empty() : tensor<64x128xf32>
// CHECK: linalg.generic {{.*}} outs(%[[E]] : tensor<64x128xf32>)
#rc = affine_map<(i, j) -> (i, j)>
func.func @argument(%l: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %e = tensor.empty() : tensor<64x128xf32>
  %g = linalg.generic {indexing_maps = [#rc, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%l : tensor<64x128xf32>) outs(%e : tensor<64x128xf32>) {
  ^bb0(%a: f32, %o: f32):
    %x = math.exp %a : f32
    linalg.yield %x : f32
  } -> tensor<64x128xf32>
  return %g : tensor<64x128xf32>
}

// -----

// A transposed read (each point reads another point's element) and an
// input read twice stay as they are.
// CHECK-LABEL: func.func @other_points
// CHECK: linalg.matmul
// CHECK-NEXT: %[[E:.*]] = tensor.empty() : tensor<64x64xf32>
// CHECK: %[[T:.*]] = linalg.generic {{.*}} outs(%[[E]] : tensor<64x64xf32>)
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<64x64xf32>
// CHECK: linalg.generic {{.*}} ins(%[[T]], %[[T]] : {{.*}}) outs(%[[E2]] : tensor<64x64xf32>)
#rc = affine_map<(i, j) -> (i, j)>
#cr = affine_map<(i, j) -> (j, i)>
func.func @other_points(%x: tensor<64x32xf32>, %w: tensor<32x64xf32>) -> tensor<64x64xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<64x64xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %l = linalg.matmul ins(%x, %w : tensor<64x32xf32>, tensor<32x64xf32>) outs(%f0 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e = tensor.empty() : tensor<64x64xf32>
  %t = linalg.generic {indexing_maps = [#cr, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%l : tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<64x64xf32>
  %e2 = tensor.empty() : tensor<64x64xf32>
  %s = linalg.generic {indexing_maps = [#rc, #cr, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%t, %t : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e2 : tensor<64x64xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %x2 = arith.addf %a, %b : f32
    linalg.yield %x2 : f32
  } -> tensor<64x64xf32>
  return %s : tensor<64x64xf32>
}

// -----

// Only the op at the peak: g (n and g side by side) writes over n, and the
// peak moves to the product after it; h, later, keeps its own buffer
// although it reads p last.
// CHECK-LABEL: func.func @not_at_peak
// CHECK: %[[N:.*]] = linalg.matmul
// CHECK: %[[G:.*]] = linalg.generic {{.*}} outs(%[[N]] : tensor<64x64xf32>)
// CHECK: %[[P:.*]] = linalg.generic
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.negf
// CHECK: %[[E:.*]] = tensor.empty() : tensor<64x16xf32>
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[P]] : tensor<64x16xf32>) outs(%[[E]] : tensor<64x16xf32>)
#rc = affine_map<(i, j) -> (i, j)>
func.func @not_at_peak(%x: tensor<64x32xf32>, %w: tensor<32x64xf32>, %w2: tensor<64x16xf32>) -> tensor<64x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<64x64xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %n = linalg.matmul ins(%x, %w : tensor<64x32xf32>, tensor<32x64xf32>) outs(%f0 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e = tensor.empty() : tensor<64x64xf32>
  %g = linalg.generic {indexing_maps = [#rc, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%n : tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %x2 = math.exp %a : f32
    linalg.yield %x2 : f32
  } -> tensor<64x64xf32>
  %e1 = tensor.empty() : tensor<64x16xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<64x16xf32>) -> tensor<64x16xf32>
  %s = linalg.matmul ins(%g, %w2 : tensor<64x64xf32>, tensor<64x16xf32>) outs(%f1 : tensor<64x16xf32>) -> tensor<64x16xf32>
  %e3 = tensor.empty() : tensor<64x16xf32>
  %p = linalg.generic {indexing_maps = [#rc, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<64x16xf32>) outs(%e3 : tensor<64x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %x4 = arith.negf %a : f32
    linalg.yield %x4 : f32
  } -> tensor<64x16xf32>
  %e2 = tensor.empty() : tensor<64x16xf32>
  %h = linalg.generic {indexing_maps = [#rc, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%p : tensor<64x16xf32>) outs(%e2 : tensor<64x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %x3 = math.exp %a : f32
    linalg.yield %x3 : f32
  } -> tensor<64x16xf32>
  return %h : tensor<64x16xf32>
}
