"""What the plugin writes for people and machines: failure text, the summary table, JSON, baselines, and pytest's captured logs."""
