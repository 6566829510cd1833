// RUN: dc-opt %s --split-input-file --dc-map-to-gpu=cuda-toolkit=/cuda --verify-diagnostics

// Nothing may allocate device memory in the step.
func.func @alloc(%y: memref<4xf32>) {
  // expected-error @+1 {{dc-map-to-gpu: a device allocation in the step}}
  %t = memref.alloc() : memref<4xf32>
  linalg.copy ins(%t : memref<4xf32>) outs(%y : memref<4xf32>)
  return
}

// -----

// A value computed on the GPU cannot feed the host.
func.func @host_reads_device(%x: memref<4xindex>, %y: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{dc-map-to-gpu: runs on the GPU but its result is used by the host}}
  %i = memref.load %x[%c0] : memref<4xindex>
  %v = memref.subview %y[%i] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1], offset: ?>>
  return
}

// -----

// A dense constant bufferizes to a global in host memory, which kernels
// cannot read.
memref.global "private" constant @table : memref<4xf32> = dense<1.0>
func.func @constant_table(%y: memref<4xf32>) {
  // expected-error @+1 {{dc-map-to-gpu: a constant tensor (table) lives in host memory; the GPU target does not place constants in device memory yet}}
  %t = memref.get_global @table : memref<4xf32>
  linalg.copy ins(%t : memref<4xf32>) outs(%y : memref<4xf32>)
  return
}
