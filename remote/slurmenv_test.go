package remote

import (
	"prun/remote/spawn"
	"slices"
	"testing"
)

func TestSlurmJobEnv(t *testing.T) {
	got := spawn.SlurmJobEnv([]string{"HOME=/root", "SLURM_JOB_ID=7", "SLURM_NODELIST=n[1-3]", "SLURM_PROCID=0", "SLURM_LOCALID=0",
		"SLURM_TASK_PID=99", "SLURM_GTIDS=0", "SLURM_NODEID=0", "SLURM_CPUS_ON_NODE=2", "SLURM_TOPOLOGY_ADDR=n1",
		"SLURM_TASKS_PER_NODE=2(x3)", "SLURMD_NODENAME=n1"})
	want := []string{"SLURM_JOB_ID=7", "SLURM_NODELIST=n[1-3]", "SLURM_TASKS_PER_NODE=2(x3)"}
	if !slices.Equal(got, want) {
		t.Errorf("slurmJobEnv: %q, want %q", got, want)
	}
}
