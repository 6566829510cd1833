// RUN: dc-opt %s --dc-profile-ops | FileCheck %s

// Each timed op of the step is bracketed by dcrt_op_begin / dcrt_op_end with
// the cost model's key "<function>:<ordinal>": ordinals count the non-dc ops
// (the constant is #0 and is not timed), dc ops are not timed.

// CHECK-DAG: llvm.mlir.global internal constant @[[KEY1:.*]]("step:1\00")
// CHECK-DAG: llvm.mlir.global internal constant @[[KEY2:.*]]("step:2\00")
// CHECK-DAG: llvm.func @dcrt_op_begin() -> i64
// CHECK-DAG: llvm.func @dcrt_op_end(!llvm.ptr, i64)
// CHECK-LABEL: func.func @step
// CHECK: dc.gather_start
// CHECK-NEXT: arith.constant
// CHECK-NEXT: dc.wait
// CHECK-NEXT: %[[T1:.*]] = llvm.call @dcrt_op_begin() : () -> i64
// CHECK-NEXT: tensor.empty
// CHECK-NEXT: %[[A1:.*]] = llvm.mlir.addressof @[[KEY1]]
// CHECK-NEXT: %[[P1:.*]] = llvm.getelementptr %[[A1]][0, 0]
// CHECK-NEXT: llvm.call @dcrt_op_end(%[[P1]], %[[T1]])
// CHECK-NEXT: %[[T2:.*]] = llvm.call @dcrt_op_begin() : () -> i64
// CHECK-NEXT: linalg.mul
// CHECK-NEXT: %[[A2:.*]] = llvm.mlir.addressof @[[KEY2]]
// CHECK-NEXT: %[[P2:.*]] = llvm.getelementptr %[[A2]][0, 0]
// CHECK-NEXT: llvm.call @dcrt_op_end(%[[P2]], %[[T2]])
// CHECK-NEXT: dc.release
// CHECK-NEXT: return
shard.grid @world(shape = 2)
func.func @step(%w: !dc.shard<tensor<8xf32>, @world[0], local = 4>, %x: tensor<8xf32>) -> tensor<8xf32> {
  %f = dc.gather_start %w : !dc.shard<tensor<8xf32>, @world[0], local = 4> -> !dc.future<tensor<8xf32>>
  %c = arith.constant 2.0 : f32
  %full = dc.wait %f : !dc.future<tensor<8xf32>>
  %init = tensor.empty() : tensor<8xf32>
  %y = linalg.mul ins(%full, %x : tensor<8xf32>, tensor<8xf32>) outs(%init : tensor<8xf32>) -> tensor<8xf32>
  dc.release %full : tensor<8xf32>
  return %y : tensor<8xf32>
}

// A private function is no step: not timed.
// CHECK-LABEL: func.func private @helper
// CHECK-NOT: dcrt_op_begin
func.func private @helper(%x: tensor<8xf32>) -> tensor<8xf32> {
  %init = tensor.empty() : tensor<8xf32>
  %y = linalg.mul ins(%x, %x : tensor<8xf32>, tensor<8xf32>) outs(%init : tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
