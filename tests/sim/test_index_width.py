"""Index arithmetic is 64-bit in the simulator, as in the PTX: no int32 wrap-around, no
OverflowError from an offset past 2**31, no false IndexError in a tensor of 2**32
elements (zero-stride views keep the memory small)."""
import numpy as np

import tilejit
import tilejit.language as T


@tilejit.kernel
def times(C, N):
    with T.Kernel(1, threads=32) as bx:
        for i in T.Parallel(8):
            C[i] = i * N


@tilejit.kernel
def gather(A, C, offset):
    with T.Kernel(2, threads=32) as bx:
        for i in T.Parallel(4):
            C[bx * 4 + i] = A[offset + bx * 4 + i]


@tilejit.kernel
def last_block(A, C, block: T.constexpr = 256):
    N = A.shape[0]
    with T.Kernel(1, threads=256) as bx:
        for i in T.Parallel(block):
            idx = (N // block - 1) * block + i      # the last block of A: past 2**31
            if idx < N:
                C[i] = A[idx] + idx


def _huge(n, value=7.0, dtype=np.float32):
    """A read-only n-element view of one element (stride 0)."""
    one = np.full(1, value, dtype=dtype)
    return np.lib.stride_tricks.as_strided(one, shape=(n,), strides=(0,), writeable=False)


def test_index_times_a_big_scalar_is_64_bit():
    c = np.zeros(8, np.int64)
    times(c, 2**30)
    np.testing.assert_array_equal(c, np.arange(8, dtype=np.int64) * 2**30)


def test_offsets_past_2_31():
    a = _huge(2**32)
    for offset in (2**31 - 2, 2**31 + 5, 2**32 - 8):     # wraps in int32; past int32
        c = np.zeros(8, np.float32)
        gather(a, c, offset)
        np.testing.assert_array_equal(c, np.full(8, 7.0, np.float32))


def test_zero_stride_input_of_2_32_elements():
    a = _huge(2**32, value=1.0, dtype=np.float64)
    c = np.zeros(256, np.float64)
    last_block(a, c)
    np.testing.assert_array_equal(c, 1.0 + (2**32 - 256) + np.arange(256, dtype=np.float64))
