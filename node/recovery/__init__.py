"""Durability and recovery of a node's data plane: input log, snapshots, restart."""
