"""TileLang's ``tilelang.carver`` module path, for what kernels ask of the device:
``from tilejit.carver.arch import driver`` then ``driver.get_num_sms()``."""
