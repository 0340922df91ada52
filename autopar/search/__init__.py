"""Enumerate the plans the rules accept, prune by memory, rank by the cost model."""
