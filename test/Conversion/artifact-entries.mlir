// RUN: dc-opt %s --split-input-file --dc-artifact-entries --verify-diagnostics | FileCheck %s

// A step lowered with the bare-pointer calling convention: two arguments and
// one result (an out-parameter). Its entry loads the three pointers from the
// buffer array, calls it and ends the step; the step becomes internal and
// loses its dc attributes.

// CHECK: llvm.func @dcrt_end_step()
// CHECK-LABEL: llvm.func internal @train_step
// CHECK-SAME: (%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr {llvm.noalias})
// CHECK-NOT: dc.
// CHECK: llvm.func @helper()
// CHECK: llvm.func @dc_entry_train_step(%[[BUFFERS:.*]]: !llvm.ptr)
// CHECK-NEXT: %[[S0:.*]] = llvm.getelementptr %[[BUFFERS]][0] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[P0:.*]] = llvm.load %[[S0]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: %[[S1:.*]] = llvm.getelementptr %[[BUFFERS]][1] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[P1:.*]] = llvm.load %[[S1]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: %[[S2:.*]] = llvm.getelementptr %[[BUFFERS]][2] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[P2:.*]] = llvm.load %[[S2]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: llvm.call @train_step(%[[P0]], %[[P1]], %[[P2]]) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CHECK-NEXT: llvm.call @dcrt_end_step() : () -> ()
// CHECK-NEXT: llvm.return
llvm.func @train_step(%w: !llvm.ptr {dc.param = #dc.param<id = 0>}, %x: !llvm.ptr,
                      %loss: !llvm.ptr {dc.loss, llvm.noalias})
    attributes {dc.entry = "dc_entry_train_step"} {
  llvm.return
}

// A function without dc.entry is left alone.
llvm.func @helper() {
  llvm.return
}

// -----

// expected-error @+1 {{step @step must take one pointer per argument and result and return nothing (results as out-parameters, bare-pointer calling convention), got '!llvm.func<i32 (ptr)>'}}
llvm.func @step(%x: !llvm.ptr) -> i32 attributes {dc.entry = "dc_entry_step"} {
  %0 = llvm.mlir.constant(0 : i32) : i32
  llvm.return %0 : i32
}

// -----

// expected-error @+1 {{@dc_entry_step exists already; it is the entry of @step}}
llvm.func @step(%x: !llvm.ptr) attributes {dc.entry = "dc_entry_step"} {
  llvm.return
}
llvm.func @dc_entry_step(%x: !llvm.ptr) {
  llvm.return
}
