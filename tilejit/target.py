"""What the compiler may ask about the hardware it compiles for."""


def sm_number(arch: str) -> int:
    """The compute capability in an arch name ("sm_90a" → 90); 0 for the simulator."""
    digits = "".join(ch for ch in arch if ch.isdigit())
    return int(digits) if digits else 0
