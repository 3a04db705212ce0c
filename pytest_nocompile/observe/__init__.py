"""Where the plugin observes torch and other processes: dynamo's logs, its arrival, child processes and their reports."""
