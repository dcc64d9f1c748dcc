package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repeatCase is a command line of TestRepeatedPlacement.
type repeatCase struct {
	args string
	vars map[string]string // the environment, when not testEnv's
	// err is the whole message of a conflict; "" when the line is
	// accepted, with the policies mapBy and bindTo (when given).
	err, mapBy, bindTo string
}

// repeatCases are TestRepeatedPlacement's command lines.
var repeatCases = []repeatCase{
	// The same value twice, however spelled: harmless.
	{args: "--map-by node --map-by node", mapBy: "node"},
	{args: "--map-by node --map-by NODE", mapBy: "node"},
	{args: "--map-by socket --map-by package", mapBy: "package"},
	{args: "--map-by core:2 --map-by slot:PE=2", mapBy: "slot:PE=2"}, // Hydra's core:N is PE=N
	{args: "--map-by ppr:2:node:PE=2 --map-by ppr:2:node:pe=2", mapBy: "ppr:2:node:PE=2"},
	{args: "--rank-by core:span --rank-by CORE:SPAN"},
	{args: "--bind-to core --bind-to core", bindTo: "core"},
	{args: "--bind-to core --bind-to-core", bindTo: "core"},
	{args: "--bind-to core:overload-allowed --bind-to-core", bindTo: "core:overload-allowed"}, // the target agrees
	{args: "--bind-to-core --bind-to-core", bindTo: "core"},
	{args: "-N 2 --npernode 2", mapBy: "ppr:2:node"},
	{args: "--npernode 2 --map-by ppr:2:node:OVERSUBSCRIBE", mapBy: "ppr:2:node:OVERSUBSCRIBE"},
	{args: "-ppn 2 -ppn 2", mapBy: "ppr:2:node"},
	{args: "--bynode --map-by node", mapBy: "node"},
	{args: "--cpus-per-proc 2 --map-by core:PE=2", mapBy: "core:PE=2"},
	{args: "--cpus-per-proc 2 --cpus-per-rank 2", mapBy: ":PE=2"},
	{args: "--bind-to core:2 --map-by :PE=2", mapBy: ":PE=2", bindTo: "core:2"},
	{args: "--ppr 2:core --ppr 2:core --map-by ppr:2:core", mapBy: "ppr:2:core"},
	{args: "--cpu-set 0,1 --cpu-list 0-1", mapBy: "pe-list=0-1"},
	{args: "-membind bind:0 -membind BIND:0"},
	{args: "--hostfile h --machinefile ./h"},
	{args: "--hostfile h -f h"},
	{args: "--rankfile r -rf ./r", mapBy: "rankfile"},
	{args: "--rankfile r --map-by :OVERSUBSCRIBE", mapBy: "rankfile:OVERSUBSCRIBE"}, // qualifies the rankfile's mapping
	{args: "--rankfile r --map-by rankfile:FILE=./r", mapBy: "rankfile:FILE=./r"},
	{args: "-rmk slurm -rmk SLURM -order-nodes ascending -order-nodes ASCENDING -max-vm-size 2 -max-vm-size 2 --topology t.xml --topology t.xml"},
	{args: "--oversubscribe --oversubscribe --map-by :OVERSUBSCRIBE", mapBy: ":OVERSUBSCRIBE"},
	// List options add up.
	{args: "-H a -H b --host c --add-host d --add-host e --display map --display allocation"},
	// A later context's own hosts and hostfile are its own.
	{args: "--hostfile h1 -n 1 ./app : --hostfile h2 -n 1 ./app2 : -f h3 ./app"},
	{args: "-H a -n 1 ./app : -H b -H c -n 1 ./app2"},
	// Open MPI's parameters and Hydra's variables yield to the command line.
	{args: "--map-by node", vars: map[string]string{"OMPI_MCA_rmaps_base_mapping_policy": "core"}, mapBy: "node"},
	{args: "--bind-to none", vars: map[string]string{"HYDRA_BINDING": "core", "PRTE_MCA_hwloc_base_binding_policy": "numa"}, bindTo: "none"},
	{args: "-ppn 2", vars: map[string]string{"HYDRA_MAPPING": "core"}, mapBy: "ppr:2:node"},
	{args: "--map-by :NOOVERSUBSCRIBE", vars: map[string]string{"OMPI_MCA_rmaps_base_oversubscribe": "1"}, mapBy: ":NOOVERSUBSCRIBE"},
	{args: "--map-by slot:OVERSUBSCRIBE", vars: map[string]string{"PRTE_MCA_rmaps_base_no_oversubscribe": "1"}, mapBy: "slot:OVERSUBSCRIBE"},
	{args: "--map-by core:CORECPUS", vars: map[string]string{"OMPI_MCA_hwloc_base_use_hwthreads_as_cpus": "1"}, mapBy: "core:CORECPUS"},
	{args: "--map-by core", vars: map[string]string{"OMPI_MCA_hwloc_base_use_hwthreads_as_cpus": "1"}, mapBy: "core:HWTCPUS"},

	// A single-valued option given twice differently.
	{args: "--map-by node --map-by slot", err: "--map-by slot conflicts with --map-by node"},
	{args: "--map-by core:PE=2 --map-by core:PE=3", err: "--map-by core:PE=3 conflicts with --map-by core:PE=2"},
	{args: "--map-by core --map-by core:SPAN", err: "--map-by core:SPAN conflicts with --map-by core"},
	{args: "--map-by node --map-by bogus", err: `--map-by "bogus": unknown policy "bogus" (want slot, hwthread, core, l1cache, l2cache, l3cache, numa, package, node, seq, ppr, rankfile or pe-list)`},
	{args: "--rank-by slot --rank-by node", err: "--rank-by node conflicts with --rank-by slot"},
	{args: "--rank-by core:span --rank-by core:fill", err: "--rank-by core:fill conflicts with --rank-by core:span"},
	{args: "--bind-to core --bind-to none", err: "--bind-to none conflicts with --bind-to core"},
	{args: "--bind-to core:overload-allowed --bind-to core", err: "--bind-to core conflicts with --bind-to core:overload-allowed"},
	{args: "-npernode 2 -npernode 3", err: "--npernode 3 conflicts with --npernode 2"},
	{args: "-N 2 --npernode 3", err: "--npernode 3 conflicts with --npernode 2"},
	{args: "-ppn 2 -ppn 4", err: "-ppn 4 conflicts with -ppn 2"},
	{args: "--cpus-per-proc 2 --cpus-per-proc 3", err: "--cpus-per-proc 3 conflicts with --cpus-per-proc 2"},
	{args: "--ppr 2:core --ppr 1:core", err: "--ppr 1:core conflicts with --ppr 2:core"},
	{args: "--cpu-set 0 --cpu-list 1", err: "--cpu-list 1 conflicts with --cpu-set 0"},
	{args: "-membind bind:0 -membind interleave", err: "-membind interleave conflicts with -membind bind:0"},
	{args: "--hostfile h1 --hostfile h2", err: "--hostfile h2 conflicts with --hostfile h1"},
	{args: "--hostfile h1 -f h2", err: "-f h2 conflicts with --hostfile h1"},
	{args: "--rankfile a -rf b", err: "--rf b conflicts with --rankfile a"},
	{args: "--default-hostfile a --default-hostfile b", err: "--default-hostfile b conflicts with --default-hostfile a"},
	{args: "-rmk slurm -rmk pbs", err: "-rmk pbs conflicts with -rmk slurm"},
	{args: "-max-vm-size 2 -max-vm-size 3", err: "--max-vm-size 3 conflicts with --max-vm-size 2"},
	{args: "--topology a.xml --topology b.xml", err: "--topology b.xml conflicts with --topology a.xml"},
	{args: "-localhost a -localhost b", err: "-localhost b conflicts with -localhost a"},
	{args: "-n 1 ./app : --hostfile h1 --machinefile h2 -n 1 ./app2", err: "--machinefile h2 conflicts with --hostfile h1 in application context 2"},
	// An older spelling that contradicts the policy it is applied over.
	{args: "--map-by node --byslot", err: "--byslot conflicts with --map-by node"},
	{args: "--bynode --byslot", err: "--byslot conflicts with --bynode"},
	{args: "--npersocket 1 --bysocket --map-by ppr:1:socket", err: "--bysocket conflicts with --map-by ppr:1:socket"},
	{args: "--map-by ppr:2:node -npernode 3", err: "--npernode 3 conflicts with --map-by ppr:2:node"},
	{args: "--pernode --npernode 2", err: "--pernode conflicts with --npernode 2"},
	{args: "-ppn 2 --map-by ppr:2:node", err: "-ppn 2 conflicts with --map-by ppr:2:node"}, // Hydra's goes round again
	{args: "-ppn 2 -npernode 2", err: "-ppn 2 conflicts with --npernode 2"},
	{args: "--ppr 2:core --map-by ppr:1:core", err: "--ppr 2:core conflicts with --map-by ppr:1:core"},
	{args: "--rankfile r --bynode", err: "--bynode conflicts with --rankfile r"},
	{args: "--rankfile r --map-by :NOLOCAL --bynode", err: "--bynode conflicts with --rankfile r"},
	{args: "--rankfile r --map-by node", err: "--map-by node conflicts with --rankfile r"},
	{args: "--rankfile r --map-by rankfile:FILE=s", err: "--map-by rankfile:FILE=s conflicts with --rankfile r"},
	{args: "--rankfile r --map-by :PE=2", err: "--map-by :PE=2 with --rankfile r: PE cannot be used with rankfile"},
	{args: "--cpu-set 0 --bycore", err: "--bycore conflicts with --cpu-set 0"},
	{args: "--bind-to core --bind-to-socket", err: "--bind-to-socket conflicts with --bind-to core"},
	{args: "--bind-to-core --bind-to-none", err: "--bind-to-none conflicts with --bind-to-core"},
	{args: "--map-by core:PE=2 --cpus-per-proc 3", err: "--cpus-per-proc 3 conflicts with --map-by core:PE=2"},
	{args: "--cpus-per-proc 2 --cpus-per-rank 3", err: "--cpus-per-rank 3 conflicts with --cpus-per-proc 2"},
	{args: "--bind-to core:2 --map-by :PE=3", err: "--bind-to core:2 conflicts with --map-by :PE=3"},
	{args: "--bind-to core:2 --cpus-per-proc 3", err: "--bind-to core:2 conflicts with --cpus-per-proc 3"},
	{args: "--oversubscribe --nooversubscribe", err: "--nooversubscribe: OVERSUBSCRIBE and NOOVERSUBSCRIBE contradict each other"},
	{args: "--map-by :NOOVERSUBSCRIBE --oversubscribe", err: "--oversubscribe: OVERSUBSCRIBE and NOOVERSUBSCRIBE contradict each other"},
	// A parameter's policy that an older spelling contradicts.
	{args: "--cpus-per-proc 3", vars: map[string]string{"OMPI_MCA_rmaps_base_mapping_policy": "core:PE=2"},
		err: "--cpus-per-proc 3 conflicts with OMPI_MCA_rmaps_base_mapping_policy=core:PE=2"},
	// Placement options are global: a later context cannot have its own.
	{args: "--map-by node -n 1 ./app : --map-by slot -n 1 ./app2", err: "--map-by is a global option: give it before the first program"},
	{args: "-n 1 ./app : --bind-to core -n 1 ./app2", err: "--bind-to is a global option: give it before the first program"},
}

// TestRepeatedPlacement is the rule for placement options given more than
// once (repeat.go): a single-valued option given twice must say the same
// both times, however spelled; an older spelling must agree with the
// policy it is applied over; list options add up; a later application
// context's own hosts and hostfile are its own, not repeats; Open MPI's
// parameters and Hydra's variables yield to the command line. A conflict is
// one line naming both values, exit 2 (a UsageError), before anything
// starts.
func TestRepeatedPlacement(t *testing.T) {
	for _, tc := range repeatCases {
		env, _ := testEnv(t)
		if tc.vars != nil {
			env = withVars(t, tc.vars)
		}
		args := strings.Fields(tc.args)
		if !strings.Contains(tc.args, "./app") {
			args = append(args, "-n", "1", "./app")
		}
		req, err := Parse(args, env)
		if tc.err != "" {
			var ue *UsageError
			if !errors.As(err, &ue) || err.Error() != tc.err {
				t.Errorf("%s: %v, want the usage error %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.args, err)
			continue
		}
		pl := req.Job.Place
		if tc.mapBy != "" && pl.MapBy.String() != tc.mapBy {
			t.Errorf("%s: --map-by %s, want %s", tc.args, pl.MapBy, tc.mapBy)
		}
		if tc.bindTo != "" && pl.BindTo.String() != tc.bindTo {
			t.Errorf("%s: --bind-to %s, want %s", tc.args, pl.BindTo, tc.bindTo)
		}
	}
}

// An application file's line is a context: its --hostfile given twice
// differently is a conflict, named by the file's line (a context's -f is
// its --hostfile).
func TestRepeatedHostfileInAppFile(t *testing.T) {
	env, dir := testEnv(t)
	app := filepath.Join(dir, "appfile")
	if err := os.WriteFile(app, []byte("-n 1 ./app\n--hostfile h1 -f h2 -n 1 ./app\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse([]string{"--app", app}, env); err == nil || err.Error() != app+":2: --hostfile h2 conflicts with --hostfile h1" {
		t.Errorf("--app: %v", err)
	}
}
