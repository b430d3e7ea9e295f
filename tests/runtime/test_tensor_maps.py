"""Tensor maps for TMA (``runtime/tensor_maps.py``): the driver's arguments, innermost
dimension first, the cases TMA cannot take, and the cache. The driver call itself needs
a GPU; a recording stand-in takes its place here."""
import pytest

from tilejit.runtime.tensor_maps import MAP_BYTES, Box, TensorMaps, encode_arguments


def test_a_gemm_operand_tile_is_listed_innermost_first():
    # A (4096 x 4096 fp16, row-major), a 128 x 64 tile: rows of one 128-byte atom
    args = encode_arguments(0x7F0000000000, (4096, 4096), (4096, 1),
                            Box("float16", 2, (128, 64), 128))
    assert args["dims"] == [4096, 4096]
    assert args["strides"] == [8192]               # bytes, the outer dimension only
    assert args["box"] == [64, 128]
    assert args["element_strides"] == [1, 1]
    assert args["data_type"] == "FLOAT16" and args["swizzle"] == 128 and args["rank"] == 2


def test_an_attention_key_tile_of_a_bshd_tensor():
    # K[b, s, h, d] = (4, 4096, 32, 128) fp16; one 64-key block of one head, one 128-byte
    # atom column of the head dimension (the layout keeps atom columns apart)
    shape, strides = (4, 4096, 32, 128), (4096 * 32 * 128, 32 * 128, 128, 1)
    args = encode_arguments(1 << 20, shape, strides, Box("bfloat16", 2, (1, 64, 1, 64), 128))
    assert args["dims"] == [128, 32, 4096, 4]
    assert args["strides"] == [256, 32 * 128 * 2, 4096 * 32 * 128 * 2]
    assert args["box"] == [64, 1, 64, 1]
    assert args["data_type"] == "BFLOAT16"


@pytest.mark.parametrize("pointer,shape,strides,box,message", [
    (8, (64, 64), (64, 1), Box("float16", 2, (64, 64)), "16-byte aligned"),
    (0, (64, 64), (1, 64), Box("float16", 2, (64, 64)), "innermost dimension"),
    (0, (64, 60), (60, 1), Box("float16", 2, (64, 60), 0), "multiple of 16 bytes"),
    (0, (64, 128), (128, 1), Box("float16", 2, (64, 128)), "at most 128 bytes"),
    (0, (512, 64), (64, 1), Box("float16", 2, (512, 64)), "1..256"),
    (0, (64, 64), (64, 1), Box("float16", 2, (64, 64), 96), "swizzle must be one of"),
    (0, (64, 64), (64, 1), Box("bool", 1, (64, 64)), "no TMA data type"),
    (0, (2,) * 6, (1,) * 6, Box("float16", 2, (1,) * 6), "rank 1..5"),
    (0, (1 << 31, 64), (64, 1), Box("float16", 2, (64, 64)), "2\\^31-1"),
])
def test_what_tma_cannot_take_is_refused_by_name(pointer, shape, strides, box, message):
    with pytest.raises(ValueError, match=message):
        encode_arguments(pointer, shape, strides, box)


def test_maps_are_cached_on_what_they_encode():
    calls = []

    def encode(args):
        calls.append(args)
        return bytes([len(calls)]) * MAP_BYTES

    maps = TensorMaps(capacity=2, encode=encode)
    box = Box("float16", 2, (128, 64))
    first = maps.get(0x1000, (4096, 4096), (4096, 1), box)
    assert maps.get(0x1000, (4096, 4096), (4096, 1), box) is first
    assert len(calls) == 1
    maps.get(0x2000, (4096, 4096), (4096, 1), box)             # another pointer
    maps.get(0x1000, (4096, 4096), (4096, 1), Box("float16", 2, (64, 64)))   # another box
    assert len(calls) == 3
    maps.get(0x1000, (4096, 4096), (4096, 1), box)             # dropped: capacity 2
    assert len(calls) == 4


def test_an_encoder_of_the_wrong_size_is_an_error():
    maps = TensorMaps(encode=lambda args: b"\0" * 64)
    with pytest.raises(ValueError, match="64 bytes, expected 128"):
        maps.get(0, (64, 64), (64, 1), Box("float16", 2, (64, 64)))
