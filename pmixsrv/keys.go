package pmixsrv

/*
#include "shim.h"
*/
import "C"

// Reserved keys and attribute names, taken from the PMIx headers so that a
// typo is a compile error.
const (
	KeyUnivSize            = C.PMIX_UNIV_SIZE
	KeyTmpDir              = C.PMIX_TMPDIR
	KeyTdirRmclean         = C.PMIX_TDIR_RMCLEAN
	KeyRMName              = C.PMIX_RM_NAME
	KeyRMVersion           = C.PMIX_RM_VERSION
	KeySessionID           = C.PMIX_SESSION_ID
	KeyHostnameKeepFqdn    = C.PMIX_HOSTNAME_KEEP_FQDN
	KeyClusterID           = C.PMIX_CLUSTER_ID
	KeyJobID               = C.PMIX_JOBID
	KeyNspace              = C.PMIX_NSPACE
	KeyJobSize             = C.PMIX_JOB_SIZE
	KeyJobNumApps          = C.PMIX_JOB_NUM_APPS
	KeyMaxProcs            = C.PMIX_MAX_PROCS
	KeyNumSlots            = C.PMIX_NUM_SLOTS
	KeyNumNodes            = C.PMIX_NUM_NODES
	KeyNodeMap             = C.PMIX_NODE_MAP
	KeyNodeMapRaw          = C.PMIX_NODE_MAP_RAW
	KeyProcMap             = C.PMIX_PROC_MAP
	KeyProcMapRaw          = C.PMIX_PROC_MAP_RAW
	KeyANLMap              = C.PMIX_ANL_MAP
	KeyNodeList            = C.PMIX_NODE_LIST
	KeyAllocatedNodelist   = C.PMIX_ALLOCATED_NODELIST
	KeyNumAllocatedNodes   = C.PMIX_NUM_ALLOCATED_NODES
	KeyCmdLine             = C.PMIX_CMD_LINE
	KeyNSDir               = C.PMIX_NSDIR
	KeyNprocOffset         = C.PMIX_NPROC_OFFSET
	KeyLocalPeers          = C.PMIX_LOCAL_PEERS
	KeyLocalLdr            = C.PMIX_LOCALLDR
	KeyLocalSize           = C.PMIX_LOCAL_SIZE
	KeyLocalProcs          = C.PMIX_LOCAL_PROCS
	KeyAppInfoArray        = C.PMIX_APP_INFO_ARRAY
	KeyAppNum              = C.PMIX_APPNUM
	KeyAppSize             = C.PMIX_APP_SIZE
	KeyAppLdr              = C.PMIX_APPLDR
	KeyAppArgv             = C.PMIX_APP_ARGV
	KeyWDir                = C.PMIX_WDIR
	KeyHost                = C.PMIX_HOST
	KeyAddHost             = C.PMIX_ADD_HOST
	KeyHostfile            = C.PMIX_HOSTFILE
	KeyAddHostfile         = C.PMIX_ADD_HOSTFILE
	KeyAppMapType          = C.PMIX_APP_MAP_TYPE
	KeyNodeInfoArray       = C.PMIX_NODE_INFO_ARRAY
	KeyHostname            = C.PMIX_HOSTNAME
	KeyNodeID              = C.PMIX_NODEID
	KeyNodeSize            = C.PMIX_NODE_SIZE
	KeyHostnameAliases     = C.PMIX_HOSTNAME_ALIASES
	KeyNodeOversubscribed  = C.PMIX_NODE_OVERSUBSCRIBED
	KeyAvailPhysMemory     = C.PMIX_AVAIL_PHYS_MEMORY
	KeyProcInfoArray       = C.PMIX_PROC_INFO_ARRAY
	KeyRank                = C.PMIX_RANK
	KeyAppRank             = C.PMIX_APP_RANK
	KeyGlobalRank          = C.PMIX_GLOBAL_RANK
	KeyLocalRank           = C.PMIX_LOCAL_RANK
	KeyNodeRank            = C.PMIX_NODE_RANK
	KeyProcDir             = C.PMIX_PROCDIR
	KeyReincarnation       = C.PMIX_REINCARNATION
	KeySpawned             = C.PMIX_SPAWNED
	KeyParentID            = C.PMIX_PARENT_ID
	KeyProcPID             = C.PMIX_PROC_PID
	KeyExitCode            = C.PMIX_EXIT_CODE
	KeyCollectData         = C.PMIX_COLLECT_DATA
	KeyWait                = C.PMIX_WAIT
	KeyTimeout             = C.PMIX_TIMEOUT
	KeyRange               = C.PMIX_RANGE
	KeyPersistence         = C.PMIX_PERSISTENCE
	KeyQueryNamespaces     = C.PMIX_QUERY_NAMESPACES
	KeyQueryProcTable      = C.PMIX_QUERY_PROC_TABLE
	KeyQueryLocalProcTable = C.PMIX_QUERY_LOCAL_PROC_TABLE
	KeyQueryNumPsets       = C.PMIX_QUERY_NUM_PSETS
	KeyQueryNamespaceInfo  = C.PMIX_QUERY_NAMESPACE_INFO
	KeyQueryJobStatus      = C.PMIX_QUERY_JOB_STATUS
	KeyQueryPsetNames      = C.PMIX_QUERY_PSET_NAMES
	KeyQueryPsetMembership = C.PMIX_QUERY_PSET_MEMBERSHIP
	KeyQueryMemoryUsage    = C.PMIX_QUERY_MEMORY_USAGE
	KeyDaemonMemory        = C.PMIX_DAEMON_MEMORY
	KeyClientAvgMemory     = C.PMIX_CLIENT_AVG_MEMORY
	KeyJobTermStatus       = C.PMIX_JOB_TERM_STATUS
	KeyPsetName            = C.PMIX_PSET_NAME
	KeyJobCtrlKill         = C.PMIX_JOB_CTRL_KILL
	KeyJobCtrlSignal       = C.PMIX_JOB_CTRL_SIGNAL
	KeyJobCtrlTerminate    = C.PMIX_JOB_CTRL_TERMINATE
	KeyJobCtrlPreemptible  = C.PMIX_JOB_CTRL_PREEMPTIBLE
	KeyJobCtrlCheckpoint   = C.PMIX_JOB_CTRL_CHECKPOINT
	KeyJobCtrlCkptEvent    = C.PMIX_JOB_CTRL_CHECKPOINT_EVENT
	KeyJobCtrlCkptSignal   = C.PMIX_JOB_CTRL_CHECKPOINT_SIGNAL
	KeyLogStderr           = C.PMIX_LOG_STDERR
	KeyLogStdout           = C.PMIX_LOG_STDOUT
	KeyLogMsg              = C.PMIX_LOG_MSG
	KeyLogSyslog           = C.PMIX_LOG_SYSLOG
	KeyEventAffectedProc   = C.PMIX_EVENT_AFFECTED_PROC
	KeyEventAffectedProcs  = C.PMIX_EVENT_AFFECTED_PROCS
	KeyEventNonDefault     = C.PMIX_EVENT_NON_DEFAULT
	KeyEventDoNotCache     = C.PMIX_EVENT_DO_NOT_CACHE
	KeyCPUSet              = C.PMIX_CPUSET
	KeyLocalCPUSets        = C.PMIX_LOCAL_CPUSETS
	KeyLocalityString      = C.PMIX_LOCALITY_STRING
	KeyDebugStopInInit     = C.PMIX_DEBUG_STOP_IN_INIT
	KeyEventCustomRange    = C.PMIX_EVENT_CUSTOM_RANGE
)

// Event ranges.
const (
	RangeRM        DataRange = C.PMIX_RANGE_RM         // the host (resource manager) alone
	RangeLocal     DataRange = C.PMIX_RANGE_LOCAL      // this node's clients
	RangeProcLocal DataRange = C.PMIX_RANGE_PROC_LOCAL // the source process alone
	RangeCustom    DataRange = C.PMIX_RANGE_CUSTOM     // the processes of KeyEventCustomRange
	RangeSession   DataRange = C.PMIX_RANGE_SESSION    // every process of the launch, tools included
)

// PersistFirstRead is the PMIX_PERSISTENCE of published data that goes with
// its first lookup.
const PersistFirstRead Persistence = C.PMIX_PERSIST_FIRST_READ
