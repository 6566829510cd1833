// RUN: dc-opt %s --one-shot-bufferize="bufferize-function-boundaries" -verify-diagnostics
// RUN: dc-opt %s --dc-expand-experts="keep-library-types" --one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s

// libdcrt's grouping takes no capacity: a grouping with one must go
// through dc-expand-experts first (dc-lower-to-llvm runs it), which leaves
// two plain groupings for the calls.

// CHECK-LABEL: func.func @capacity
// CHECK: dc.group_by_expert_into %{{.*}} into %{{.*}}, %{{.*}} experts = 4 :
// CHECK: dc.group_by_expert_into %{{.*}} into %{{.*}}, %{{.*}} experts = 4 :
// CHECK-NOT: capacity
func.func @capacity(%i: tensor<16x2xi64>) -> (tensor<32xi64>, tensor<4xi64>) {
  // expected-error @+2 {{dc.group_by_expert with a capacity must be expanded (dc-expand-experts) before it is bufferized}}
  // expected-error @+1 {{failed to bufferize op}}
  %order, %ends = dc.group_by_expert %i experts = 4 capacity = 10 : tensor<16x2xi64> -> tensor<32xi64>, tensor<4xi64>
  return %order, %ends : tensor<32xi64>, tensor<4xi64>
}
