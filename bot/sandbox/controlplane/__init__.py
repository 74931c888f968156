"""A faithful local simulator of the training-cluster control plane."""

from bot.sandbox.controlplane.rpc import SimError
from bot.sandbox.controlplane.server import create_app, mount
from bot.sandbox.controlplane.state import DEMO_FIXTURES, Durations, SimulatorState

__all__ = ["DEMO_FIXTURES", "Durations", "SimError", "SimulatorState", "create_app", "mount"]
