"""`autopar profile`: measure this node (or these nodes, under torchrun).

This package is the only part of autopar that imports torch, and it does so
lazily: ``command.run_profile`` checks for torch first and only then imports the
modules that use it. Nothing outside ``autopar.probe`` may import this package at
module level (the CLI imports ``autopar.probe.command`` inside the command).

Modules, one concern each:

- ``settings``  what to measure: sizes, dtypes, repetitions, timeouts (quick or full)
- ``results``   plain frozen values the ranks send back (no torch)
- ``fit``       alpha-beta fits with nccl-tests bus-bandwidth factors, efficiency curves
- ``peaks``     datasheet peak FLOP/s and HBM bandwidth of known GPUs
- ``runtime``   importing torch, choosing the device, versions, the watchdog
- ``timing``    warm-up, repetitions, synchronisation, median
- ``compute``   GEMM sweep, causal attention fwd+bwd, HBM copy, device memory
- ``comm``      collectives over message sizes, group sizes and tiers
- ``overlap``   slowdown of a GEMM and of an all-reduce run concurrently
- ``worker``    what one rank does, start to finish
- ``launch``    torchrun, torch.multiprocessing or one process; progress; kill on hang
- ``writer``    measurements -> profile YAML (schema 1), atomic write
- ``yamlio``    YAML output in the built-in profiles' layout (short lists on one line)
- ``report``    rich summary and ``--compare`` table
- ``command``   ``run_profile``: the entry point the CLI calls
"""
