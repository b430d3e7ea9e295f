"""TileLang's ``tilelang.carver`` module path: what kernels ask of the device (``from
tilejit.carver.arch import driver`` then ``driver.get_num_sms()``), and the tile
recommender (``from tilejit.carver.template import MatmulTemplate``; ``recommend.py``)."""
