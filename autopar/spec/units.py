"""Units used across layers. Inside autopar sizes are bytes; GiB is how they are shown and read."""

from __future__ import annotations

GIB = 2**30  # bytes in a GiB (the unit of memory_gib, memory_gib_per_gpu and every table's GiB column)
