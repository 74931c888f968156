"""Power saving in a pool that scales with the queue, on the simulator's clock, as Slurm's
power_save.html describes it:

- a cloud node (``CLOUD``) with no VM is ``POWERED_DOWN``; a job allocated to it resumes it:
  the VM exists at once and the node is ``POWERING_UP`` (``alloc#`` in sinfo) while it
  boots (``boot_seconds``, within ResumeTimeout), its job ``CONFIGURING`` meanwhile;
- a node idle for ``SuspendTime`` (``suspend_time``) is suspended: powered down, its VM gone.
  Until then it is ``IDLE`` and paid for: the idle tail the bot sees and prices;
- a pool never goes below its minimum, nor above its maximum.

Each read advances the pool to the clock's time, so a cluster read later shows what has
happened since.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Both 0 unless set through /_sim/slurm (a VM at once, gone at once), so that a resize is
# seen as it is asked; a realistic pool is, say, 180 s of boot and SuspendTime=600.
BOOT_SECONDS = 0.0  # a VM's boot and slurmd's start: the node is POWERING_UP meanwhile
SUSPEND_TIME = 0.0  # slurm.conf SuspendTime: idle seconds before a node powers down


@dataclass
class PoolPower:
    """One pool's VMs: when each was created, and since when each has been unneeded."""

    vms: int = 0
    created: dict[int, float] = field(default_factory=dict)  # node index -> VM created at
    unneeded: dict[int, float] = field(default_factory=dict)  # node index -> idle since

    def advance(
        self,
        wanted: int,
        low: int,
        now: float,
        suspend_time: float = SUSPEND_TIME,
    ) -> int:
        """The VMs the pool has at ``now`` when the queue wants ``wanted`` nodes (already
        within the pool's bounds): new ones at once, idle ones once past ``suspend_time``."""
        wanted = max(wanted, low)
        for index in range(self.vms, wanted):
            self.created[index] = now
        self.vms = max(self.vms, wanted)
        for index in range(self.vms):
            if index < wanted:
                self.unneeded.pop(index, None)
            else:
                self.unneeded.setdefault(index, now)
        while self.vms > wanted and now - self.unneeded[self.vms - 1] >= suspend_time:
            self.vms -= 1
            self.created.pop(self.vms, None)
            self.unneeded.pop(self.vms, None)
        return self.vms

    def booting(self, now: float, boot: float = BOOT_SECONDS) -> set[int]:
        """The node indexes whose VM is still booting."""
        return {i for i, at in self.created.items() if i < self.vms and now - at < boot}
