"""A node's part in partitioned ``m3`` boxes (Cumulus, docs/cumulus.md §3.8)."""
