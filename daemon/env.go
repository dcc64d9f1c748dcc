package daemon

import (
	"slices"
	"strconv"
	"strings"

	"prun/jobspec"
	"prun/mapper"
	"prun/sessiondir"
)

// environ is the part of a shell that builds its ranks' environments, in
// layers: prun's tuning defaults lose to anything else, then the node's
// environment (what may be inherited of it), the PMIx server's variables,
// the rank's place in the job, and the user's -x, which wins.
type environ struct {
	plan    *Plan
	base    []string // the node's environment for ranks (Config.BaseEnv)
	tuning  []string // prun's start-up defaults on this node (ompi.go)
	session string   // the session directory's id
}

func newEnviron(p *Plan, cfg Config, tuning []string) environ {
	return environ{plan: p, base: cfg.BaseEnv, tuning: tuning, session: cfg.Session.ID()}
}

// of is the environment of rank pr given the PMIx server's variables.
func (e environ) of(pr mapper.Proc, pmixEnv []string) []string {
	p := e.plan
	app := &p.Job.Apps[pr.App]
	user := app.Env
	if p.Parent != nil {
		// A spawning rank hands over environments copied from its own:
		// they must not describe the parent's place in its job.
		user = filterInherited(user)
	}
	base := e.base
	if app.EnvNone {
		base = nil
	}
	tuning := e.tuning
	if p.Job.NoHostnamePropagation {
		tuning = slices.DeleteFunc(slices.Clone(tuning), isHostnamePropagation)
	}
	return rankEnv(base, user, pmixEnv, e.mpi(pr), tuning)
}

// mpi is what MPI libraries and scripts expect beside the PMIx variables.
func (e environ) mpi(pr mapper.Proc) []string {
	p := e.plan
	size := strconv.Itoa(len(p.Map.Procs))
	lsize := strconv.Itoa(len(p.Map.Nodes[pr.Node].Procs))
	rank, lrank, nrank := strconv.Itoa(pr.Rank), strconv.Itoa(pr.LocalRank), strconv.Itoa(pr.NodeRank)
	univ := strconv.Itoa(p.UnivSize)
	app := strconv.Itoa(pr.App)
	env := []string{
		"OMPI_COMM_WORLD_RANK=" + rank,
		"OMPI_COMM_WORLD_SIZE=" + size,
		"OMPI_COMM_WORLD_LOCAL_RANK=" + lrank,
		"OMPI_COMM_WORLD_LOCAL_SIZE=" + lsize,
		"OMPI_COMM_WORLD_NODE_RANK=" + nrank,
		// Open MPI 4.1 starts every rank as a singleton unless this is set
		// (to any contact URI): only then does it take the PMIx path.
		"OMPI_MCA_orte_local_daemon_uri=" + ompiDaemonURI,
		"PRUN_RANK=" + rank,
		"PRUN_SIZE=" + size,
		"PRUN_LOCAL_RANK=" + lrank,
		"PRUN_LOCAL_SIZE=" + lsize,
		"PRUN_NODE_RANK=" + nrank,
		"PRUN_APPNUM=" + app,
		sessiondir.NspaceEnv + "=" + p.Nspace,
		sessiondir.SessionEnv + "=" + e.session, // how a later prun finds a killed one's leftovers
	}
	if p.UnivSize != jobspec.UnivInfinite {
		env = append(env, "OMPI_UNIVERSE_SIZE="+univ, "PRUN_UNIVERSE_SIZE="+univ)
	}
	if p.Map.Oversubscribed(pr.Node) && !envHas(e.base, "OMPI_MCA_mpi_yield_when_idle") {
		// As mpirun does: busy-polling ranks that outnumber the cores
		// starve each other.
		env = append(env, "OMPI_MCA_mpi_yield_when_idle=1")
	}
	return env
}

// ompiDaemonURI must parse as an ORTE contact URI ("jobid.vpid;tcp://addr:port")
// or Open MPI 4.1 fails in MPI_Init. Nothing ever connects to it: under a
// PMIx server Open MPI talks only PMIx.
const ompiDaemonURI = "0.0;tcp://127.0.0.1:1"

// isHostnamePropagation tells the variable by which prun gives MPICH its
// node's name (Hydra's hostname propagation).
func isHostnamePropagation(kv string) bool {
	return strings.HasPrefix(kv, "MPIR_CVAR_CH3_INTERFACE_HOSTNAME=")
}

// Inherited reports whether a launcher variable may pass to ranks: variables
// that describe the launcher's own place in some outer job must not.
func Inherited(kv string) bool {
	for _, pre := range []string{"PMIX_", "PMI_", "OMPI_COMM_WORLD_", "OMPI_MCA_orte_", "OMPI_MCA_ess_base_",
		"OMPI_UNIVERSE_SIZE=", "OMPI_FIRST_RANKS=", "OMPI_APP_CTX_NUM_PROCS=", "OMPI_NUM_APP_CTX=",
		"MPI_LOCALNRANKS=", "MPI_LOCALRANKID=",
		// A Slurm task's identity (prun's own, in a batch step or an srun
		// step): a rank is no Slurm task (remote/spawn/slurm.go).
		"SLURM_PROCID=", "SLURM_LOCALID=", "SLURM_TASK_PID=", "SLURM_GTIDS="} {
		if strings.HasPrefix(kv, pre) {
			return strings.HasPrefix(kv, "PMIX_MCA_") // user tuning of PMIx stays
		}
	}
	return true
}

func filterInherited(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if Inherited(kv) {
			out = append(out, kv)
		}
	}
	return out
}

// rankEnv merges the environment layers: prun's tuning defaults lose to
// anything else, the user's -x wins over everything.
func rankEnv(base, user, pmix, mpi, tuning []string) []string {
	out := make([]string, 0, len(base)+len(user)+len(pmix)+len(mpi)+len(tuning))
	index := make(map[string]int, cap(out))
	add := func(kv string) {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := index[k]; ok {
			out[i] = kv
			return
		}
		index[k] = len(out)
		out = append(out, kv)
	}
	for _, kv := range tuning {
		add(kv)
	}
	for _, kv := range base {
		if Inherited(kv) {
			add(kv)
		}
	}
	for _, layer := range [][]string{pmix, mpi, user} {
		for _, kv := range layer {
			add(kv)
		}
	}
	// A default that the user's choice of another variable contradicts
	// goes: Open MPI refuses an interface include list beside an exclude.
	for _, kv := range tuning {
		k, _, _ := strings.Cut(kv, "=")
		for _, c := range tuningConflicts[k] {
			if _, ok := index[c]; ok && out[index[k]] == kv {
				out[index[k]] = ""
			}
		}
	}
	return slices.DeleteFunc(out, func(kv string) bool { return kv == "" })
}

// tuningConflicts: prun's default for a variable (key) is dropped when the
// user set one of these.
var tuningConflicts = map[string][]string{
	"OMPI_MCA_btl_tcp_if_include": {"OMPI_MCA_btl_tcp_if_exclude"},
	"OMPI_MCA_oob_tcp_if_include": {"OMPI_MCA_oob_tcp_if_exclude"},
}
