"""The detail screen of one GPU and its server."""
