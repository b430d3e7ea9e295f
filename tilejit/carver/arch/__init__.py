"""``tilejit.carver.arch``: the device's figures (``driver``)."""
