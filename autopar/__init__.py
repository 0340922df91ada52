"""autopar: a parallelism advisor for training large models on many GPUs."""

__version__ = "0.1.0"
