"""Seed 004, classic-style matmul_kernel on T.Buffer, sizes from the seed: the program as the seed writes it, imports changed to tilejit."""
import tilejit as tilelang
import tilejit.language as T


# 定义分块超参数
M, N, K = 1024, 1024, 1024
BLOCK_M, BLOCK_N, BLOCK_K = 128, 128, 32

@T.prim_func
def matmul_kernel(
    # 定义输入张量全局内存指针，类型声明为 float16
    A: T.Buffer((M, K), "float16"),
    B: T.Buffer((K, N), "float16"),
    # 定义输出张量全局内存指针，存储矩阵乘结果
    C: T.Buffer((M, N), "float16"),
):
    # 绑定计算网格维度，声明 GPU 线程块的组织拓扑
    with T.Kernel(T.ceildiv(N, BLOCK_N), T.ceildiv(M, BLOCK_M), threads=128) as (bx, by):
        # 声明共享内存分块缓冲区，用于承载循环迭代中的切片数据
        A_shared = T.alloc_shared((BLOCK_M, BLOCK_K), "float16")
        B_shared = T.alloc_shared((BLOCK_K, BLOCK_N), "float16")
        # 声明寄存器累加局部缓冲区，使用 float32 保证累加数值精度
        C_local = T.alloc_fragment((BLOCK_M, BLOCK_N), "float32")

        # 初始化寄存器累加器全零状态
        T.clear(C_local)

        # 遍历 K 维度并启用两级软件流水展开
        for k in T.Pipelined(T.ceildiv(K, BLOCK_K), num_stages=2):
            # 将全局内存分块载入共享内存，触发硬件异步拷贝
            T.copy(A[by * BLOCK_M : (by + 1) * BLOCK_M, k * BLOCK_K : (k + 1) * BLOCK_K], A_shared)
            T.copy(B[k * BLOCK_K : (k + 1) * BLOCK_K, bx * BLOCK_N : (bx + 1) * BLOCK_N], B_shared)
            # 调用微架构 Tensor Core MMA 指令执行分块矩阵乘
            T.gemm(A_shared, B_shared, C_local)

        # 将累加结果格式化写回全局内存目标地址
        T.copy(C_local, C[by * BLOCK_M : (by + 1) * BLOCK_M, bx * BLOCK_N : (bx + 1) * BLOCK_N])
