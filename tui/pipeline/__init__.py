"""The resumable generation pipeline (core): dispatch, durable shards, done record, S3, status."""
