"""Transport shared by Head, nodes, regional and global components.

One module per concept: ``addressing`` (endpoints and URLs), ``auth`` (the
cluster token), ``server`` (an HTTP listener with limits and auth),
``client`` (calls to peers, with timeouts and counters).
"""
