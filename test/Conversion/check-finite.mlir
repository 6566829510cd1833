// RUN: dc-opt %s --dc-check-finite | FileCheck %s

// After each op that computes into memory, a check of each float buffer it
// writes, named by the op's location (the PyTorch frontend's FX node and
// model source line). Fills and copies make no new values: not checked.
// CHECK-LABEL: func.func @step
// CHECK: linalg.fill
// CHECK-NOT: dc.check_finite
// CHECK: linalg.generic
// CHECK: linalg.yield
// CHECK-NEXT: }
// CHECK-NEXT: dc.check_finite %[[Y:.*]], "step: linalg.generic of pow_4 (backward: PowBackward0) at model.py:40" : memref<4x8xf32>
// CHECK: linalg.copy
// CHECK-NOT: dc.check_finite
// CHECK: linalg.matmul
// CHECK-NEXT: dc.check_finite %{{.*}}, "step: linalg.matmul of mm_2 at model.py:12" : memref<4x4xbf16>
// CHECK: return
func.func @step(%x: memref<4x8xf32>, %y: memref<4x8xf32>, %z: memref<4x8xf32>,
                %a: memref<4x8xbf16>, %b: memref<8x4xbf16>, %c: memref<4x4xbf16>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%z : memref<4x8xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<4x8xf32>) outs(%y : memref<4x8xf32>) {
  ^bb0(%v: f32, %out: f32):
    %one = arith.constant 1.0 : f32
    %p = math.powf %v, %one : f32
    linalg.yield %p : f32
  } loc("pow_4 (backward: PowBackward0)"("model.py":40:0))
  linalg.copy ins(%y : memref<4x8xf32>) outs(%z : memref<4x8xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x4xbf16>) outs(%c : memref<4x4xbf16>) loc("mm_2"("model.py":12:0))
  return
}

// An op that uses an infinite constant (a mask's -inf) may write
// infinities on purpose: NaN only. Integer outputs are not checked.
// CHECK-LABEL: func.func @mask
// CHECK: linalg.generic
// CHECK: dc.check_finite %{{.*}}, "mask: linalg.generic of masked_fill at model.py:52" allow_inf : memref<4x4xf32>
// CHECK: linalg.generic
// CHECK-NOT: dc.check_finite
// CHECK: return
func.func @mask(%s: memref<4x4xf32>, %m: memref<4x4xi1>, %o: memref<4x4xf32>, %i: memref<4x4xi64>) {
  %ninf = arith.constant 0xFF800000 : f32
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>,
                                   affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%s, %m : memref<4x4xf32>, memref<4x4xi1>) outs(%o : memref<4x4xf32>) {
  ^bb0(%v: f32, %keep: i1, %out: f32):
    %r = arith.select %keep, %v, %ninf : f32
    linalg.yield %r : f32
  } loc("masked_fill"("model.py":52:0))
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      outs(%i : memref<4x4xi64>) {
  ^bb0(%out: i64):
    %j = linalg.index 1 : index
    %v = arith.index_cast %j : index to i64
    linalg.yield %v : i64
  }
  return
}

// A kernel: the buffers its body stores into, through the views it takes
// of them (the check reads the whole view the kernel was given); a
// strided view (a column slice) is not checked. Private functions are not
// steps.
// CHECK-LABEL: func.func @kernel
// CHECK: gpu.launch
// CHECK: gpu.terminator
// CHECK-NEXT: }
// CHECK-NEXT: dc.check_finite %[[V:.*]], "kernel: kernel of add at model.py:7" : memref<16xf32>
// CHECK-NOT: dc.check_finite
// CHECK: return
func.func @kernel(%arena: memref<256xi8>, %slice: memref<4x2xf32, strided<[4, 1], offset: 2>>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %v = memref.view %arena[%c0][] : memref<256xi8> to memref<16xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c16, %sy = %c1, %sz = %c1) {
    %e = memref.expand_shape %v [[0, 1]] output_shape [4, 4] : memref<16xf32> into memref<4x4xf32>
    %f = arith.constant 2.0 : f32
    memref.store %f, %e[%c0, %tx] : memref<4x4xf32>
    memref.store %f, %slice[%c0, %c0] : memref<4x2xf32, strided<[4, 1], offset: 2>>
    gpu.terminator
  } loc("add"("model.py":7:0))
  return
}

// CHECK-LABEL: func.func private @helper
// CHECK-NOT: dc.check_finite
func.func private @helper(%x: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>], iterator_types = ["parallel"]}
      outs(%x : memref<4xf32>) {
  ^bb0(%out: f32):
    %two = arith.constant 2.0 : f32
    linalg.yield %two : f32
  }
  return
}
