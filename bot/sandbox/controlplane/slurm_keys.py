"""slurm.conf parameter names the simulated control plane accepts in a cluster's ``config``,
a partition's ``config`` and a node set's ``config``, and those it refuses.

The provider schema (``orchestratorSpec.slurmSpec.config``): "Keys are Slurm parameter names
exactly as documented by SchedMD (https://slurm.schedmd.com/slurm.conf.html), matched
case-insensitively. Unsupported, reserved, or misspelled parameters ... are rejected at
request time with the offending parameter named". Names are kept here lower-cased with
underscores removed, the way they are compared.
"""

from __future__ import annotations


def normal(key: str) -> str:
    """How keys are compared: case-insensitively, ignoring underscores."""
    return key.lower().replace("_", "")


_CLUSTER = """
AccountingStorageEnforce AccountingStorageTRES AccountingStoreFlags AcctGatherNodeFreq
AllowSpecResourcesUsage AuthAltTypes AuthInfo BatchStartTimeout BurstBufferType
CompleteWait CpuFreqDef CpuFreqGovernors DefCpuPerGPU DefMemPerCPU DefMemPerGPU DefMemPerNode
DependencyParameters DisableRootJobs EioTimeout EnforcePartLimits FairShareDampeningFactor
FirstJobId GetEnvTimeout GpuFreqDef GresTypes GroupUpdateForce GroupUpdateTime InactiveLimit
InteractiveStepOptions JobAcctGatherFrequency JobAcctGatherParams JobDefaults
JobFileAppend JobRequeue KillOnBadExit KillWait LaunchParameters MailDomain MaxArraySize
MaxBatchRequeue MaxDBDMsgs MaxJobCount MaxJobId MaxMemPerCPU MaxMemPerNode MaxNodeCount
MaxStepCount MaxTasksPerNode MCSParameters MessageTimeout MinJobAge MpiDefault MpiParams
OverTimeLimit PreemptExemptTime PreemptMode PreemptParameters PreemptType
PrioritySiteFactorParameters
PriorityCalcPeriod PriorityDecayHalfLife PriorityFavorSmall PriorityFlags PriorityMaxAge
PriorityParameters PriorityUsageResetPeriod PriorityType PriorityWeightAge
PriorityWeightAssoc PriorityWeightFairshare PriorityWeightJobSize PriorityWeightPartition
PriorityWeightQOS PriorityWeightTRES PrivateData PropagatePrioProcess PropagateResourceLimits
PropagateResourceLimitsExcept RequeueExitHold ResumeRate ResumeTimeout ResvEpilog ResvOverRun
ResvProlog ReturnToService SchedulerParameters SchedulerTimeSlice SchedulerType
SelectType SelectTypeParameters SlurmctldDebug SlurmctldParameters SlurmdDebug
SlurmdParameters SuspendRate SuspendTime SuspendTimeout TaskPlugin TaskPluginParam
TCPTimeout TmpFS TopologyParam TopologyPlugin TrackWCKey TreeWidth UnkillableStepTimeout
UsePAM VSizeFactor WaitTime
"""

# The service manages these itself (the reference lists Prolog, Epilog, the health check and
# RequeueExit; slurmdbd's own settings and storage credentials are not slurm.conf's to set).
_REFUSED = """
Prolog Epilog PrologSlurmctld EpilogSlurmctld HealthCheckProgram HealthCheckInterval
HealthCheckNodeState RequeueExit ClusterName SlurmctldHost SlurmctldPort SlurmdPort
SlurmUser SlurmdUser StateSaveLocation SlurmdSpoolDir AuthType CredType
AccountingStorageType AccountingStorageHost AccountingStoragePort AccountingStoragePass
AccountingStorageUser AccountingStorageBackupHost AccountingStorageExternalHost
PurgeJobAfter PurgeStepAfter PurgeEventAfter PurgeResvAfter PurgeSuspendAfter
PurgeTXNAfter PurgeUsageAfter ArchiveJobs ArchiveSteps ArchiveDir ArchiveScript DbdHost
DbdAddr DbdPort DbdBackupHost StorageHost StoragePort StoragePass StorageUser StorageLoc
StorageType
"""

_PARTITION = """
AllocNodes AllowAccounts AllowGroups AllowQos Alternate CpuBind DefaultTime DefCpuPerGPU
DefMemPerCPU DefMemPerGPU DefMemPerNode DenyAccounts DenyQos DisableRootJobs ExclusiveUser
ExclusiveTopo GraceTime Hidden LLN MaxCPUsPerNode MaxCPUsPerSocket MaxMemPerCPU MaxMemPerNode
MaxNodes MaxTime MinNodes OverSubscribe OverTimeLimit PowerDownOnIdle PreemptMode
PriorityJobFactor PriorityTier QOS ReqResv ResumeTimeout RootOnly SelectTypeParameters
State SuspendTime SuspendTimeout TRESBillingWeights
"""

_NODE = """
Features Weight MemSpecLimit CoreSpecCount CpuSpecList Gres RealMemory TmpDisk
CPUs Sockets CoresPerSocket ThreadsPerCore Boards Reason Port
"""


def _set(words: str) -> frozenset[str]:
    return frozenset(normal(w) for w in words.split())


REFUSED_KEYS = _set(_REFUSED)
CLUSTER_KEYS = _set(_CLUSTER)
PARTITION_KEYS = _set(_PARTITION)
NODE_KEYS = _set(_NODE)
