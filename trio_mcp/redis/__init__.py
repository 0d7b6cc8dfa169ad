"""The Redis stores and bus: the only room that imports the Redis client."""
