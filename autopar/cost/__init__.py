"""The cost model: pure functions of (model, hardware, job, plan). No torch, no I/O."""
