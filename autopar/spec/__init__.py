"""Input values: model, hardware, job and plan, frozen and validated when built."""
