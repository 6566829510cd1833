// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-slow-link-target.json memory-budget=80KiB" --dc-offload-activations="min-bytes=1024" --dc-attach-target=memory-budget=80KiB --dc-verify-schedule | FileCheck %s
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-slow-link-target.json memory-budget=70KiB" --dc-offload-activations="min-bytes=1024" --dc-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: dc-opt %s --dc-attach-target="target=%S/Inputs/toy-slow-link-target.json memory-budget=70KiB" --dc-offload-activations="min-bytes=1024" --dc-report="json=true output=%t.json" -o /dev/null
// RUN: %python -c "import json,sys; r=json.load(open(sys.argv[1]))[0]; f=r['offloadFloor']['stallSeconds']; print('floor>0', f > 0, 'exposed>=floor', r['exposedCopySeconds'] >= f)" %t.json | FileCheck %s --check-prefix=JSON
// RUN: dc-opt %s --dc-attach-target=target=%S/Inputs/toy-slow-link-target.json --dc-report -o /dev/null | FileCheck %s --check-prefix=NOFLOOR

// A slow host link (15 MB/s: a 16 KiB copy takes 1.09 ms, two matmuls take
// 1.05 ms): four 16 KiB activations, the step peaks at 112.25 KiB at the end
// of the forward. Offloads queue on one device-to-host stream and reloads
// on one host-to-device stream.

// At 80 KiB three activations go (a1, a2, a3). The reloads come back in the
// order of their uses (FIFO = earliest deadline first), each as early as the
// budget lets it, so the queue is never behind a later use's copy.
// CHECK-LABEL: func.func @step
// CHECK-SAME: dc.offload_floor = #dc.offload_floor<excess_bytes = 33024, stall_seconds = {{.*}}>
// CHECK: %[[H1:.*]] = dc.wait %{{.*}} : !dc.future<!dc.host<tensor<64x64xf32>>>
// CHECK: %[[H2:.*]] = dc.wait %{{.*}} : !dc.future<!dc.host<tensor<64x64xf32>>>
// CHECK: %[[H3:.*]] = dc.wait %{{.*}} : !dc.future<!dc.host<tensor<64x64xf32>>>
// One op earlier, a3's reload would hold 80.25 KiB live during k4:
// CHECK: arith.mulf
// CHECK-NEXT: %[[R3:.*]] = dc.reload_start %[[H3]]
// CHECK: dc.wait %[[R3]]
// CHECK: %[[R2:.*]] = dc.reload_start %[[H2]]
// CHECK: dc.wait %[[R2]]
// CHECK: %[[R1:.*]] = dc.reload_start %[[H1]]
// CHECK: dc.wait %[[R1]]
// CHECK-NOT: dc.reload_start

// 42.25 KiB over budget at the peak: before it, the device-to-host stream has
// the 1.6 ms since a1 went idle for copies of 2.9 ms. No placement stalls
// less than the floor; dc's stalls no less (and says both).
// REPORT: host copies (busy)         6.554 ms   exposed      1.831 ms
// REPORT: offload floor              1.307 ms   of copy stall for any placement (42.25 KiB (43264 B) over budget at the peak)
// JSON: floor>0 True exposed>=floor True

// Nothing offloaded: no floor line.
// NOFLOOR-NOT: offload floor

func.func @step(%x: tensor<64x64xf32>) -> (tensor<64xf32> {dc.loss}, tensor<64xf32>) {
  %e = tensor.empty() : tensor<64x64xf32>
  %r = tensor.empty() : tensor<64xf32>
  %a1 = linalg.matmul ins(%x, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %a2 = linalg.matmul ins(%a1, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %a3 = linalg.matmul ins(%a2, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %a4 = linalg.matmul ins(%a3, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %out = linalg.matmul ins(%a4, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %loss = linalg.reduce ins(%out : tensor<64x64xf32>) outs(%r : tensor<64xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  %g4 = linalg.matmul ins(%out, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %k4 = linalg.matmul ins(%g4, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h4 = arith.mulf %k4, %a4 : tensor<64x64xf32>
  %g3 = linalg.matmul ins(%h4, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %k3 = linalg.matmul ins(%g3, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h3 = arith.mulf %k3, %a3 : tensor<64x64xf32>
  %g2 = linalg.matmul ins(%h3, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %k2 = linalg.matmul ins(%g2, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h2 = arith.mulf %k2, %a2 : tensor<64x64xf32>
  %g1 = linalg.matmul ins(%h2, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %k1 = linalg.matmul ins(%g1, %x : tensor<64x64xf32>, tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %h1 = arith.mulf %k1, %a1 : tensor<64x64xf32>
  %grad = linalg.reduce ins(%h1 : tensor<64x64xf32>) outs(%r : tensor<64xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %loss, %grad : tensor<64xf32>, tensor<64xf32>
}
