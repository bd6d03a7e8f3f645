// The seed kernel `stream` with blocking transfers only (no tokens): each tile
// is moved into VMEM ring 0 (two slots) and consumed at once.
module attributes {vx.target = "cpu"} {
  func.func @stream_blocking(%tiles: memref<?x128x128xf32, "HBM"> {vx.name = "tiles"}, %w: memref<128x128xf32, "HBM"> {vx.name = "w"}) -> memref<128x128xf32, "HBM"> attributes {vx.topology = "TensorCore"} {
    %wv = "vx.transfer"(%w) {space = "VMEM", from = "HBM", within = "HBM", capacity = 2097152 : i64, granule = 4096 : i64, offset = 131072 : i64, slots = 1 : i64, slot_bytes = 65536 : i64, ring = 1 : i64, scope = "device", edge_cost = 50 : i64} : (memref<128x128xf32, "HBM">) -> memref<128x128xf32, "VMEM">
    %acc = "vx.zeros"() {space = "VMEM", offset = 196608 : i64, slots = 1 : i64, slot_bytes = 65536 : i64, ring = 2 : i64} : () -> memref<128x128xf32, "VMEM">
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %n = "vx.len"(%tiles) : (memref<?x128x128xf32, "HBM">) -> index
    scf.for %i = %c0 to %n step %c1 {
      %ti = "vx.element"(%tiles, %i) {proved = 0 : i64} : (memref<?x128x128xf32, "HBM">, index) -> memref<128x128xf32, "HBM">
      %cur = "vx.transfer"(%ti) {space = "VMEM", from = "HBM", within = "HBM", capacity = 2097152 : i64, granule = 4096 : i64, offset = 0 : i64, slots = 2 : i64, slot_bytes = 65536 : i64, ring = 0 : i64, scope = "device", edge_cost = 50 : i64} : (memref<128x128xf32, "HBM">) -> memref<128x128xf32, "VMEM">
      "vx.matmul_acc"(%acc, %cur, %wv) {transpose = ""} : (memref<128x128xf32, "VMEM">, memref<128x128xf32, "VMEM">, memref<128x128xf32, "VMEM">) -> ()
    }
    %out = "vx.transfer"(%acc) {space = "HBM", from = "VMEM", within = "", capacity = 0 : i64, granule = 0 : i64, offset = 0 : i64, slots = 1 : i64, slot_bytes = 65536 : i64, ring = -1 : i64, scope = "device", edge_cost = 50 : i64} : (memref<128x128xf32, "VMEM">) -> memref<128x128xf32, "HBM">
    return %out : memref<128x128xf32, "HBM">
  }
}
