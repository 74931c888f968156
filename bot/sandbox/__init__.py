"""Local stand-ins that speak the real wire protocols over loopback, for the demo and tests."""
