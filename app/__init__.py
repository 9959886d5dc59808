"""The running service: settings, the delivery engine, housekeeping, the CLI."""
