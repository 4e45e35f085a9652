"""MkDocs adapter for Anchored: config, build hooks, widget assets and the CLI."""
