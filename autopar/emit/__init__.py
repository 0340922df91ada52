"""Launch commands: one module per target framework."""
