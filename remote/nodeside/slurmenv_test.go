package nodeside

import (
	"os"
	"prun/remote/wire"
	"strings"
	"testing"
)

// slurmDaemonEnv keeps of the step's variables only its node's, and puts
// the node's SLURM_NODEID (its index in the job's SLURM_NODELIST) after
// the job's variables.
func TestSlurmDaemonEnv(t *testing.T) {
	for k, v := range map[string]string{"SLURMD_NODENAME": "n3", "SLURM_JOB_NAME": "prun-daemons", "SLURM_STEP_ID": "4",
		"SLURM_NODEID": "1", "SLURM_CPUS_ON_NODE": "2", "SLURM_NNODES": "2", "SLURM_LAUNCH_NODE_IPADDR": "10.0.0.1"} {
		t.Setenv(k, v)
	}
	b := wire.Bootstrap{Hosts: []string{"n2", "n3"}, Env: []string{"OMPI_MCA_x=1", "SLURM_JOB_NAME=job.sh", "SLURM_NODELIST=n[1-3]",
		"SLURM_NNODES=3", "SLURM_NODEID=0"}}
	if err := slurmDaemonEnv(&b); err != nil {
		t.Fatal(err)
	}
	if b.Vertex != 2 || b.Hint != "10.0.0.1" {
		t.Errorf("vertex %d hint %q, want 2 and 10.0.0.1", b.Vertex, b.Hint)
	}
	for _, k := range []string{"SLURM_JOB_NAME", "SLURM_STEP_ID", "SLURM_NNODES", "SLURM_NODEID", "SLURM_CPUS_ON_NODE"} {
		if v, ok := os.LookupEnv(k); ok {
			t.Errorf("%s=%s of the step left in the daemon's environment", k, v)
		}
	}
	if os.Getenv("SLURMD_NODENAME") != "n3" {
		t.Errorf("SLURMD_NODENAME dropped")
	}
	tail := strings.Join(b.Env[5:], " ")
	if tail != "SLURM_CPUS_ON_NODE=2 SLURM_NODEID=2" {
		t.Errorf("the node's own variables after the job's: %q", tail)
	}
	b = wire.Bootstrap{Hosts: []string{"n1"}}
	if err := slurmDaemonEnv(&b); err == nil || !strings.Contains(err.Error(), "this node (n3) is not among the daemons' hosts") {
		t.Errorf("a node not in the list: %v", err)
	}
}
