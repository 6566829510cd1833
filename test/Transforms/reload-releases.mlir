// RUN: dc-opt %s --split-input-file --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=1MiB" --dc-offload-activations --dc-attach-target --dc-verify-schedule | FileCheck %s
// RUN: dc-opt %s --split-input-file --dc-attach-target="target=%S/Inputs/toy-target.json memory-budget=1MiB" --dc-offload-activations --dc-offload-activations --dc-attach-target --dc-verify-schedule | FileCheck %s

// Where the offload passes release reloaded values (insertReloadReleases):
// right after the top-level op of the last use of the value or of a view
// of it, one release per value, also when the pass runs again. These steps
// fit the budget, so the pass offloads nothing and only places releases.

// A view shares the reloaded buffer: the release follows the view's use.
// CHECK-LABEL: func.func @view
// CHECK: %[[R:.*]] = dc.wait
// CHECK-NEXT: %[[V:.*]] = tensor.collapse_shape %[[R]]
// CHECK-NEXT: arith.addf %[[R]], %[[R]]
// CHECK-NEXT: %[[N:.*]] = arith.negf %[[V]]
// CHECK-NEXT: dc.release %[[R]] : tensor<4x4xf32>
// CHECK-NEXT: return
func.func @view(%h: !dc.host<tensor<4x4xf32>>) -> (tensor<4x4xf32>, tensor<16xf32>) {
  %l = dc.reload_start %h : !dc.host<tensor<4x4xf32>>
  %r = dc.wait %l : !dc.future<tensor<4x4xf32>>
  %v = tensor.collapse_shape %r [[0, 1]] : tensor<4x4xf32> into tensor<16xf32>
  %s = arith.addf %r, %r : tensor<4x4xf32>
  %n = arith.negf %v : tensor<16xf32>
  return %s, %n : tensor<4x4xf32>, tensor<16xf32>
}

// -----

// A use inside a loop counts at the loop; a loop result carrying the value
// (its init, yielded unchanged) is the same buffer.
// CHECK-LABEL: func.func @loop
// CHECK: %[[R:.*]] = dc.wait
// CHECK: %[[L:.*]] = scf.for
// CHECK: arith.addf %[[L]], %[[L]]
// CHECK-NEXT: dc.release %[[R]] : tensor<4xf32>
// CHECK-NEXT: return
func.func @loop(%h: !dc.host<tensor<4xf32>>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %l = dc.reload_start %h : !dc.host<tensor<4xf32>>
  %r = dc.wait %l : !dc.future<tensor<4xf32>>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %loop = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %r) -> (tensor<4xf32>) {
    scf.yield %acc : tensor<4xf32>
  }
  %y = arith.addf %loop, %loop : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A use inside a nested region counts at its top-level op.
// CHECK-LABEL: func.func @captured
// CHECK: %[[R:.*]] = dc.wait
// CHECK: scf.for
// CHECK: arith.addf %{{.*}}, %[[R]]
// CHECK: scf.yield
// CHECK-NEXT: }
// CHECK-NEXT: dc.release %[[R]] : tensor<4xf32>
func.func @captured(%h: !dc.host<tensor<4xf32>>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %l = dc.reload_start %h : !dc.host<tensor<4xf32>>
  %r = dc.wait %l : !dc.future<tensor<4xf32>>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %loop = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %x) -> (tensor<4xf32>) {
    %next = arith.addf %acc, %r : tensor<4xf32>
    scf.yield %next : tensor<4xf32>
  }
  return %loop : tensor<4xf32>
}

// -----

// A misplaced release moves after the last use; a second one goes.
// CHECK-LABEL: func.func @moved
// CHECK: %[[R:.*]] = dc.wait
// CHECK-NEXT: arith.addf %[[R]], %[[R]]
// CHECK-NEXT: arith.mulf %[[R]], %[[R]]
// CHECK-NEXT: dc.release %[[R]] : tensor<4xf32>
// CHECK-NOT: dc.release
func.func @moved(%h: !dc.host<tensor<4xf32>>) -> (tensor<4xf32>, tensor<4xf32>) {
  %l = dc.reload_start %h : !dc.host<tensor<4xf32>>
  %r = dc.wait %l : !dc.future<tensor<4xf32>>
  dc.release %r : tensor<4xf32>
  %a = arith.addf %r, %r : tensor<4xf32>
  dc.release %r : tensor<4xf32>
  %b = arith.mulf %r, %r : tensor<4xf32>
  return %a, %b : tensor<4xf32>, tensor<4xf32>
}

// -----

// Unused: released right after its wait. Returned: the caller's, never
// released. Two values last used by one op: released in wait order.
// CHECK-LABEL: func.func @edges
// CHECK: %[[U:.*]] = dc.wait
// CHECK-NEXT: dc.release %[[U]]
// CHECK: %[[A:.*]] = dc.wait
// CHECK: %[[B:.*]] = dc.wait
// CHECK: %[[C:.*]] = dc.wait
// CHECK-NEXT: arith.addf %[[A]], %[[B]]
// CHECK-NEXT: dc.release %[[A]]
// CHECK-NEXT: dc.release %[[B]]
// CHECK-NOT: dc.release
// CHECK: return %{{.*}}, %[[C]]
func.func @edges(%h0: !dc.host<tensor<4xf32>>, %h1: !dc.host<tensor<4xf32>>, %h2: !dc.host<tensor<4xf32>>, %h3: !dc.host<tensor<4xf32>>) -> (tensor<4xf32>, tensor<4xf32>) {
  %l0 = dc.reload_start %h0 : !dc.host<tensor<4xf32>>
  %u = dc.wait %l0 : !dc.future<tensor<4xf32>>
  %l1 = dc.reload_start %h1 : !dc.host<tensor<4xf32>>
  %a = dc.wait %l1 : !dc.future<tensor<4xf32>>
  %l2 = dc.reload_start %h2 : !dc.host<tensor<4xf32>>
  %b = dc.wait %l2 : !dc.future<tensor<4xf32>>
  %l3 = dc.reload_start %h3 : !dc.host<tensor<4xf32>>
  %c = dc.wait %l3 : !dc.future<tensor<4xf32>>
  dc.release %c : tensor<4xf32>
  %s = arith.addf %a, %b : tensor<4xf32>
  return %s, %c : tensor<4xf32>, tensor<4xf32>
}
