// The seed kernel `stream` (acc = sum_i tiles[i] @ w), hand-lowered to vx.
// Ring 0 is the ping-pong pair of in-flight tiles: offsets 0 and 65536 of VMEM.
module attributes {vx.target = "cpu"} {
  func.func @stream(%tiles: memref<?x128x128xf32, "HBM"> {vx.name = "tiles"}, %w: memref<128x128xf32, "HBM"> {vx.name = "w"}) -> memref<128x128xf32, "HBM"> attributes {vx.topology = "TensorCore"} {
    %wv = "vx.transfer"(%w) {space = "VMEM", from = "HBM", within = "HBM", capacity = 2097152 : i64, granule = 4096 : i64, offset = 131072 : i64, slots = 1 : i64, slot_bytes = 65536 : i64, ring = 1 : i64, scope = "device", edge_cost = 50 : i64} : (memref<128x128xf32, "HBM">) -> memref<128x128xf32, "VMEM">
    %acc = "vx.zeros"() {space = "VMEM", offset = 196608 : i64, slots = 1 : i64, slot_bytes = 65536 : i64, ring = 2 : i64} : () -> memref<128x128xf32, "VMEM">
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %t0 = "vx.element"(%tiles, %c0) {proved = 0 : i64} : (memref<?x128x128xf32, "HBM">, index) -> memref<128x128xf32, "HBM">
    %tok0 = "vx.transfer_async"(%t0) {space = "VMEM", from = "HBM", within = "HBM", capacity = 2097152 : i64, granule = 4096 : i64, offset = 0 : i64, slots = 2 : i64, slot_bytes = 65536 : i64, ring = 0 : i64, scope = "device", edge_cost = 50 : i64} : (memref<128x128xf32, "HBM">) -> !vx.token<memref<128x128xf32, "VMEM">>
    %n = "vx.len"(%tiles) : (memref<?x128x128xf32, "HBM">) -> index
    %last = scf.for %i = %c1 to %n step %c1 iter_args(%inflight = %tok0) -> (!vx.token<memref<128x128xf32, "VMEM">>) {
      %ti = "vx.element"(%tiles, %i) {proved = 0 : i64} : (memref<?x128x128xf32, "HBM">, index) -> memref<128x128xf32, "HBM">
      %next = "vx.transfer_async"(%ti) {space = "VMEM", from = "HBM", within = "HBM", capacity = 2097152 : i64, granule = 4096 : i64, offset = 0 : i64, slots = 2 : i64, slot_bytes = 65536 : i64, ring = 0 : i64, scope = "device", edge_cost = 50 : i64} : (memref<128x128xf32, "HBM">) -> !vx.token<memref<128x128xf32, "VMEM">>
      %cur = "vx.wait"(%inflight) : (!vx.token<memref<128x128xf32, "VMEM">>) -> memref<128x128xf32, "VMEM">
      "vx.matmul_acc"(%acc, %cur, %wv) {transpose = ""} : (memref<128x128xf32, "VMEM">, memref<128x128xf32, "VMEM">, memref<128x128xf32, "VMEM">) -> ()
      scf.yield %next : !vx.token<memref<128x128xf32, "VMEM">>
    }
    %lt = "vx.wait"(%last) : (!vx.token<memref<128x128xf32, "VMEM">>) -> memref<128x128xf32, "VMEM">
    "vx.matmul_acc"(%acc, %lt, %wv) {transpose = ""} : (memref<128x128xf32, "VMEM">, memref<128x128xf32, "VMEM">, memref<128x128xf32, "VMEM">) -> ()
    %out = "vx.transfer"(%acc) {space = "HBM", from = "VMEM", within = "", capacity = 0 : i64, granule = 0 : i64, offset = 0 : i64, slots = 1 : i64, slot_bytes = 65536 : i64, ring = -1 : i64, scope = "device", edge_cost = 50 : i64} : (memref<128x128xf32, "VMEM">) -> memref<128x128xf32, "HBM">
    return %out : memref<128x128xf32, "HBM">
  }
}
