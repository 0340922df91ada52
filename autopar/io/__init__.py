"""The only file access: strict readers, presets, profiles, HF configs, atomic writes."""
