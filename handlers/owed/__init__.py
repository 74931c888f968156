"""What the bot owes the world, and the one engine that does it (``engine.py``)."""
