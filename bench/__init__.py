"""toolwire's performance benchmark: seeded provider streams, toolwire and its peers measured side by side.

Run it with `bench/run` (it builds its own virtualenv with the peers from the `bench` extra).
"""
