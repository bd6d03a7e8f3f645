// An f16 matmul, as `vxc build --emit vx-mlir` lowers it, with hand-added source
// locations (kernels carry them once the frontend attaches them): v5e has no f16
// vector loads, so libtpu rejects it, and its error must name the .vx line.
module attributes {vx.target = "tpu"} {
  func.func @mm(%arg0: memref<128x128xf16, "HBM"> {vx.name = "x"}, %arg1: memref<128x128xf16, "HBM"> {vx.name = "w"}) -> memref<128x128xf32, "HBM"> attributes {vx.launch = "instances", vx.topology = "TensorCore"} {
    %0 = "vx.transfer"(%arg0) {capacity = 134217728 : i64, edge_cost = 50 : i64, from = "HBM", granule = 4096 : i64, offset = 0 : i64, ring = 0 : i64, scope = "subcore", slot_bytes = 32768 : i64, slots = 1 : i64, space = "VMEM", within = "HBM"} : (memref<128x128xf16, "HBM">) -> memref<128x128xf16, "VMEM"> loc("mm_f16.vx":3:3)
    %1 = "vx.transfer"(%arg1) {capacity = 134217728 : i64, edge_cost = 50 : i64, from = "HBM", granule = 4096 : i64, offset = 32768 : i64, ring = 1 : i64, scope = "subcore", slot_bytes = 32768 : i64, slots = 1 : i64, space = "VMEM", within = "HBM"} : (memref<128x128xf16, "HBM">) -> memref<128x128xf16, "VMEM"> loc("mm_f16.vx":4:3)
    %2 = "vx.zeros"() {offset = 65536 : i64, ring = 2 : i64, slot_bytes = 65536 : i64, slots = 1 : i64, space = "VMEM"} : () -> memref<128x128xf32, "VMEM"> loc("mm_f16.vx":5:3)
    "vx.matmul_acc"(%2, %0, %1) {transpose = ""} : (memref<128x128xf32, "VMEM">, memref<128x128xf16, "VMEM">, memref<128x128xf16, "VMEM">) -> () loc("mm_f16.vx":6:3)
    %3 = "vx.transfer"(%2) {capacity = 17179869184 : i64, edge_cost = 50 : i64, from = "VMEM", granule = 0 : i64, offset = 0 : i64, ring = -1 : i64, scope = "device", slot_bytes = 65536 : i64, slots = 1 : i64, space = "HBM", within = ""} : (memref<128x128xf32, "VMEM">) -> memref<128x128xf32, "HBM"> loc("mm_f16.vx":7:3)
    return %3 : memref<128x128xf32, "HBM">
  }
}
