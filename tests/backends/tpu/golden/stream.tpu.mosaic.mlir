module attributes {tpu.dynamic_dimension_mapping_indices_2147483647 = [{dimension_index = 0 : i64, operand_index = 0 : i64}], tpu.dynamic_dimension_mapping_module_2147483647 = "module @jit_evaluate_shape attributes {jax.uses_shape_polymorphism = false, mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\0A  func.func public @main(%arg0: tensor<i32>) -> (tensor<i32>) {\0A    return %arg0 : tensor<i32>\0A  }\0A}\0A"} {
  func.func @stream(%arg0: i32, %arg1: memref<2147483647x128x128xf32, #tpu.memory_space<any>>, %arg2: memref<128x128xf32, #tpu.memory_space<any>>, %arg3: memref<128x128xf32, #tpu.memory_space<any>>, %arg4: memref<128x128xf32, #tpu.memory_space<vmem>>, %arg5: memref<128x128xf32, #tpu.memory_space<vmem>>, %arg6: memref<2x128x128xf32, #tpu.memory_space<vmem>>, %arg7: memref<2x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>, %arg8: memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>, %arg9: memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>, %arg10: memref<1xi32, #tpu.memory_space<smem>>) attributes {dimension_semantics = [#tpu.dimension_semantics<parallel>], iteration_bounds = array<i64: 1>, scalar_prefetch = 0 : i64, scratch_operands = 7 : i64, tpu.core_type = #tpu.core_type<tc>, window_params = [{}, {}, {}]} {
    %c0_i32 = arith.constant 0 : i32
    %c0 = arith.constant 0 : index
    memref.store %c0_i32, %arg10[%c0] : memref<1xi32, #tpu.memory_space<smem>>
    %0 = tpu.memref_slice %arg9[%c0_i32] : memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>> -> memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>
    %1 = tpu.memref_squeeze %0 : memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>> -> memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>
    tpu.enqueue_dma source(%arg2 : memref<128x128xf32, #tpu.memory_space<any>>) target(%arg4 : memref<128x128xf32, #tpu.memory_space<vmem>>) target_semaphore(%1 : memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>)
    %cst = arith.constant dense<0.000000e+00> : vector<128x128xf32>
    tpu.vector_store %arg5[%c0, %c0], %cst {strides = array<i32>} : memref<128x128xf32, #tpu.memory_space<vmem>>, vector<128x128xf32>, 
    %2 = memref.load %arg10[%c0] : memref<1xi32, #tpu.memory_space<smem>>
    %c2_i32 = arith.constant 2 : i32
    %3 = arith.remui %2, %c2_i32 : i32
    %c1_i32 = arith.constant 1 : i32
    %4 = arith.addi %2, %c1_i32 : i32
    memref.store %4, %arg10[%c0] : memref<1xi32, #tpu.memory_space<smem>>
    %5 = tpu.memref_slice %arg1[%c0_i32, %c0_i32, %c0_i32] : memref<2147483647x128x128xf32, #tpu.memory_space<any>> -> memref<1x128x128xf32, #tpu.memory_space<any>>
    %6 = tpu.memref_squeeze %5 : memref<1x128x128xf32, #tpu.memory_space<any>> -> memref<128x128xf32, #tpu.memory_space<any>>
    %7 = tpu.memref_slice %arg6[%3, %c0_i32, %c0_i32] : memref<2x128x128xf32, #tpu.memory_space<vmem>> -> memref<1x128x128xf32, #tpu.memory_space<vmem>>
    %8 = tpu.memref_squeeze %7 : memref<1x128x128xf32, #tpu.memory_space<vmem>> -> memref<128x128xf32, #tpu.memory_space<vmem>>
    %9 = tpu.memref_slice %arg7[%3] : memref<2x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>> -> memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>
    %10 = tpu.memref_squeeze %9 : memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>> -> memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>
    tpu.enqueue_dma source(%6 : memref<128x128xf32, #tpu.memory_space<any>>) target(%8 : memref<128x128xf32, #tpu.memory_space<vmem>>) target_semaphore(%10 : memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>)
    %c2147483647_i32 = arith.constant 2147483647 : i32
    tpu.wait_dma2 semaphore(%1 : memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>) src(%arg2 : memref<128x128xf32, #tpu.memory_space<any>>) dst(%arg4 : memref<128x128xf32, #tpu.memory_space<vmem>>)
    %11:2 = scf.for %arg11 = %c1_i32 to %c2147483647_i32 step %c1_i32 iter_args(%arg12 = %3, %arg13 = %c0_i32) -> (i32, i32)  : i32 {
      %26 = memref.load %arg10[%c0] : memref<1xi32, #tpu.memory_space<smem>>
      %27 = arith.remui %26, %c2_i32 : i32
      %28 = arith.addi %26, %c1_i32 : i32
      memref.store %28, %arg10[%c0] : memref<1xi32, #tpu.memory_space<smem>>
      %29 = tpu.memref_slice %arg1[%arg11, %c0_i32, %c0_i32] : memref<2147483647x128x128xf32, #tpu.memory_space<any>> -> memref<1x128x128xf32, #tpu.memory_space<any>>
      %30 = tpu.memref_squeeze %29 : memref<1x128x128xf32, #tpu.memory_space<any>> -> memref<128x128xf32, #tpu.memory_space<any>>
      %31 = tpu.memref_slice %arg6[%27, %c0_i32, %c0_i32] : memref<2x128x128xf32, #tpu.memory_space<vmem>> -> memref<1x128x128xf32, #tpu.memory_space<vmem>>
      %32 = tpu.memref_squeeze %31 : memref<1x128x128xf32, #tpu.memory_space<vmem>> -> memref<128x128xf32, #tpu.memory_space<vmem>>
      %33 = tpu.memref_slice %arg7[%27] : memref<2x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>> -> memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>
      %34 = tpu.memref_squeeze %33 : memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>> -> memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>
      tpu.enqueue_dma source(%30 : memref<128x128xf32, #tpu.memory_space<any>>) target(%32 : memref<128x128xf32, #tpu.memory_space<vmem>>) target_semaphore(%34 : memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>)
      %35 = tpu.memref_slice %arg7[%arg12] : memref<2x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>> -> memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>
      %36 = tpu.memref_squeeze %35 : memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>> -> memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>
      %37 = tpu.memref_slice %arg1[%arg13, %c0_i32, %c0_i32] : memref<2147483647x128x128xf32, #tpu.memory_space<any>> -> memref<1x128x128xf32, #tpu.memory_space<any>>
      %38 = tpu.memref_squeeze %37 : memref<1x128x128xf32, #tpu.memory_space<any>> -> memref<128x128xf32, #tpu.memory_space<any>>
      %39 = tpu.memref_slice %arg6[%arg12, %c0_i32, %c0_i32] : memref<2x128x128xf32, #tpu.memory_space<vmem>> -> memref<1x128x128xf32, #tpu.memory_space<vmem>>
      %40 = tpu.memref_squeeze %39 : memref<1x128x128xf32, #tpu.memory_space<vmem>> -> memref<128x128xf32, #tpu.memory_space<vmem>>
      tpu.wait_dma2 semaphore(%36 : memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>) src(%38 : memref<128x128xf32, #tpu.memory_space<any>>) dst(%40 : memref<128x128xf32, #tpu.memory_space<vmem>>)
      %41 = arith.index_cast %arg12 : i32 to index
      %42 = vector.load %arg6[%41, %c0, %c0] : memref<2x128x128xf32, #tpu.memory_space<vmem>>, vector<1x128x128xf32>
      %43 = vector.shape_cast %42 : vector<1x128x128xf32> to vector<128x128xf32>
      %44 = vector.load %arg4[%c0, %c0] : memref<128x128xf32, #tpu.memory_space<vmem>>, vector<128x128xf32>
      %45 = vector.load %arg5[%c0, %c0] : memref<128x128xf32, #tpu.memory_space<vmem>>, vector<128x128xf32>
      %46 = tpu.matmul %43, %44, %45 {dimension_numbers = #tpu.dot_dimension_numbers<[1], [0], [0], [1], [0, 0, 1, 1], [], []>, precision = #tpu.contract_precision<fp32>, transpose_lhs_hint = false} : vector<128x128xf32>, vector<128x128xf32>, vector<128x128xf32> -> vector<128x128xf32>
      tpu.vector_store %arg5[%c0, %c0], %46 {strides = array<i32>} : memref<128x128xf32, #tpu.memory_space<vmem>>, vector<128x128xf32>, 
      scf.yield %27, %arg11 : i32, i32
    }
    %12 = tpu.memref_slice %arg7[%11#0] : memref<2x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>> -> memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>
    %13 = tpu.memref_squeeze %12 : memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>> -> memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>
    %14 = tpu.memref_slice %arg1[%11#1, %c0_i32, %c0_i32] : memref<2147483647x128x128xf32, #tpu.memory_space<any>> -> memref<1x128x128xf32, #tpu.memory_space<any>>
    %15 = tpu.memref_squeeze %14 : memref<1x128x128xf32, #tpu.memory_space<any>> -> memref<128x128xf32, #tpu.memory_space<any>>
    %16 = tpu.memref_slice %arg6[%11#0, %c0_i32, %c0_i32] : memref<2x128x128xf32, #tpu.memory_space<vmem>> -> memref<1x128x128xf32, #tpu.memory_space<vmem>>
    %17 = tpu.memref_squeeze %16 : memref<1x128x128xf32, #tpu.memory_space<vmem>> -> memref<128x128xf32, #tpu.memory_space<vmem>>
    tpu.wait_dma2 semaphore(%13 : memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>) src(%15 : memref<128x128xf32, #tpu.memory_space<any>>) dst(%17 : memref<128x128xf32, #tpu.memory_space<vmem>>)
    %18 = arith.index_cast %11#0 : i32 to index
    %19 = vector.load %arg6[%18, %c0, %c0] : memref<2x128x128xf32, #tpu.memory_space<vmem>>, vector<1x128x128xf32>
    %20 = vector.shape_cast %19 : vector<1x128x128xf32> to vector<128x128xf32>
    %21 = vector.load %arg4[%c0, %c0] : memref<128x128xf32, #tpu.memory_space<vmem>>, vector<128x128xf32>
    %22 = vector.load %arg5[%c0, %c0] : memref<128x128xf32, #tpu.memory_space<vmem>>, vector<128x128xf32>
    %23 = tpu.matmul %20, %21, %22 {dimension_numbers = #tpu.dot_dimension_numbers<[1], [0], [0], [1], [0, 0, 1, 1], [], []>, precision = #tpu.contract_precision<fp32>, transpose_lhs_hint = false} : vector<128x128xf32>, vector<128x128xf32>, vector<128x128xf32> -> vector<128x128xf32>
    tpu.vector_store %arg5[%c0, %c0], %23 {strides = array<i32>} : memref<128x128xf32, #tpu.memory_space<vmem>>, vector<128x128xf32>, 
    %24 = tpu.memref_slice %arg8[%c0_i32] : memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>> -> memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>
    %25 = tpu.memref_squeeze %24 : memref<1x!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>> -> memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>
    tpu.enqueue_dma source(%arg5 : memref<128x128xf32, #tpu.memory_space<vmem>>) target(%arg3 : memref<128x128xf32, #tpu.memory_space<any>>) target_semaphore(%25 : memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>)
    tpu.wait_dma2 semaphore(%25 : memref<!tpu.dma_semaphore, #tpu.memory_space<semaphore_mem>>) src(%arg5 : memref<128x128xf32, #tpu.memory_space<vmem>>) dst(%arg3 : memref<128x128xf32, #tpu.memory_space<any>>)
    return
  }
}
