// RUN: dc-opt %s --dc-in-place-at-peak | FileCheck %s
// RUN: not dc-opt %s --dc-in-place-at-peak --dc-attach-target=memory-budget=1MiB --dc-verify-schedule -o /dev/null 2>&1 | FileCheck %s --check-prefix=PLANNER

// A step of dynamic shape has no memory timeline: dc-in-place-at-peak
// leaves it as it is, without an error of its own (the op keeps its
// tensor.empty init); the planners after it report the shape.
// CHECK-LABEL: func.func @dynamic
// CHECK: %[[E:.*]] = tensor.empty(%{{.*}}) : tensor<?x64xf32>
// CHECK-NEXT: linalg.generic {{.*}} outs(%[[E]] : tensor<?x64xf32>)
// PLANNER: error: cannot plan the memory of 'dynamic': argument #0 has the dynamically shaped type 'tensor<?x64xf32>'
// PLANNER-NOT: error
#rc = affine_map<(i, j) -> (i, j)>
func.func @dynamic(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %y = linalg.generic {indexing_maps = [#rc, #rc], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %b = math.exp %a : f32
    linalg.yield %b : f32
  } -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
