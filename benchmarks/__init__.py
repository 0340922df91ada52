"""Accuracy and speed benchmarks: run each as ``python -m benchmarks.NAME`` or ``python benchmarks/NAME.py``."""
