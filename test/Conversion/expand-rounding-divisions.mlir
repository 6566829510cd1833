// RUN: dc-opt %s --dc-expand-rounding-divisions | FileCheck %s

// The divisions that round toward an infinity have no LLVM lowering: they
// become plain divisions with compares and selects.
// CHECK-LABEL: func.func @rounding_divisions
// CHECK-NOT: arith.ceildivsi
// CHECK-NOT: arith.ceildivui
// CHECK-NOT: arith.floordivsi
// CHECK-DAG: arith.divsi
// CHECK-DAG: arith.divui
// CHECK: return
func.func @rounding_divisions(%a: i32, %b: i32) -> (i32, i32, i32) {
  %0 = arith.ceildivsi %a, %b : i32
  %1 = arith.ceildivui %a, %b : i32
  %2 = arith.floordivsi %a, %b : i32
  return %0, %1, %2 : i32, i32, i32
}

// Minimum and maximum stay one op each for the NVVM lowering (max.NaN,
// min.NaN), where arith-expand writes two compares and two selects; the
// other ops are not touched.
// CHECK-LABEL: func.func @min_max_kept
// CHECK-NEXT: %[[MAX:.*]] = arith.maximumf %arg0, %arg1 : f32
// CHECK-NEXT: %[[MIN:.*]] = arith.minimumf %[[MAX]], %arg1 : f32
// CHECK-NEXT: %[[MAXNUM:.*]] = arith.maxnumf %[[MIN]], %arg0 : f32
// CHECK-NEXT: %[[MINNUM:.*]] = arith.minnumf %[[MAXNUM]], %arg0 : f32
// CHECK-NEXT: %[[EXT:.*]] = arith.extf %arg2 : bf16 to f32
// CHECK-NEXT: %[[SUM:.*]] = arith.addf %[[MINNUM]], %[[EXT]] : f32
// CHECK-NEXT: %[[TRUNC:.*]] = arith.truncf %[[SUM]] : f32 to bf16
// CHECK-NEXT: %[[DIV:.*]] = arith.divsi %arg3, %arg4 : i32
// CHECK-NEXT: return %[[TRUNC]], %[[DIV]]
// CHECK-NOT: arith.cmpf
// CHECK-NOT: arith.select
func.func @min_max_kept(%x: f32, %y: f32, %h: bf16, %a: i32, %b: i32)
    -> (bf16, i32) {
  %0 = arith.maximumf %x, %y : f32
  %1 = arith.minimumf %0, %y : f32
  %2 = arith.maxnumf %1, %x : f32
  %3 = arith.minnumf %2, %x : f32
  %4 = arith.extf %h : bf16 to f32
  %5 = arith.addf %3, %4 : f32
  %6 = arith.truncf %5 : f32 to bf16
  %7 = arith.divsi %a, %b : i32
  return %6, %7 : bf16, i32
}
