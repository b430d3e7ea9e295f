"""``tilejit.carver.roller``: TileLang's ``tilelang.carver.roller`` path (its
rasterization plans, which the recommender's hints carry: ``rasterization.py``)."""
