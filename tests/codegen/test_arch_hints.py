"""An arch the NVPTX back end cannot emit (target.check_arch): the message names the
archs it emits nearest to the one asked for and a concrete arch= to pass instead."""
import pytest

from tilejit.target import Target, check_arch


@pytest.mark.parametrize("arch, near, use", [
    ("sm_110", "the nearest are sm_103 and sm_103a below and sm_120 and sm_120a above",
     "for a GPU of compute capability 11.0 pass arch='sm_103'"),
    ("compute_110", "the nearest are sm_103 and sm_103a below", "pass arch='sm_103'"),
    ("sm_101", "the nearest are sm_100 and sm_100a below and sm_103 and sm_103a above",
     "pass arch='sm_100'"),
    ("sm_999", "the newest are sm_121 and sm_121a",
     "for a GPU of compute capability 99.9 pass arch='sm_121'"),
])
def test_an_arch_between_or_beyond_the_known_ones_gets_its_neighbours(arch, near, use):
    with pytest.raises(ValueError, match="arch: expected a CUDA arch") as e:
        Target.cuda(arch)
    message = str(e.value)
    assert "llvmlite's NVPTX back end cannot emit it" in message
    assert "(PTX ISA up to 8.8)" in message and near in message and use in message
    assert "whose PTX the CUDA driver compiles for newer GPUs" in message
    suggested = message.split("pass arch='")[1].split("'")[0]
    assert check_arch(suggested) == suggested


@pytest.mark.parametrize("arch, hint", [
    ("sm_100f", "of sm_100 it emits sm_100 and sm_100a, not the 'f' variant; pass "
                "arch='sm_100a' (or 'sm_100', without the arch-specific features)"),
    ("sm_89a", "of sm_89 it emits sm_89, not the 'a' variant; pass arch='sm_89')"),
])
def test_a_suffix_the_arch_does_not_take_names_the_variants(arch, hint):
    with pytest.raises(ValueError) as e:
        check_arch(arch)
    assert hint in str(e.value)


def test_older_than_sm75_keeps_its_note():
    with pytest.raises(ValueError, match=r"\(tilejit compiles for sm_75 and newer"):
        check_arch("sm_70")
