package slurmtest

import (
	"os"
	"strings"
	"testing"
)

// TestCluster builds the cluster, runs a 3-node step in an allocation and
// checks that the teardown leaves nothing: no namespace, no daemon.
func TestCluster(t *testing.T) {
	var dir string
	var pidfiles []int
	t.Run("up", func(t *testing.T) {
		c := Start(t)
		dir = c.dir
		out, err := c.Output("salloc", "-N", "3", "srun", "--mpi=none", "sh", "-c", "echo $SLURMD_NODENAME")
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Fields(out)
		if len(got) != 3 || !strings.Contains(out, "prun-s1") || !strings.Contains(out, "prun-s3") {
			t.Fatalf("salloc -N 3 srun: %q", out)
		}
		for _, n := range Nodes {
			pidfiles = append(pidfiles, c.SlurmdPid(n))
		}
	})
	for _, n := range Nodes {
		if _, err := os.Stat("/run/netns/" + n); err == nil {
			t.Errorf("namespace %s left behind", n)
		}
	}
	for _, p := range pidfiles {
		if p > 0 {
			if _, err := os.Stat("/proc/" + itoa(p)); err == nil {
				t.Errorf("slurmd %d left behind", p)
			}
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Errorf("%s not empty after teardown: %v", dir, ents)
	}
}

func itoa(n int) string {
	b := []byte{}
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}
