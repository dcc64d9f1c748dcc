package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Open MPI start-up defaults. On a node with no high-speed fabric, Open MPI
// 4.1 still probes its "cm" PML (PSM2/OFI/portals MTLs) in every rank, which
// costs about 200 ms of MPI_Init and can never be selected there. prun
// excludes it on such nodes. Whatever the user set wins: these apply only to
// variables absent from the launcher's environment.

var (
	fabricOnce sync.Once
	hasFabric  bool
)

// nodeHasFabric reports whether the node has an RDMA or HPC fabric device
// that the cm PML could drive.
func nodeHasFabric() bool {
	fabricOnce.Do(func() {
		for _, pattern := range []string{"/sys/class/infiniband/*", "/sys/class/cxi/*", "/dev/hfi1*", "/dev/ipath*"} {
			if m, _ := filepath.Glob(pattern); len(m) > 0 {
				hasFabric = true
				return
			}
		}
	})
	return hasFabric
}

// envHas reports whether env sets name.
func envHas(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

// tuningEnv returns the defaults to add for ranks on this node.
func tuningEnv(base []string, topoXML string) []string {
	has := func(name string) bool { return envHas(base, name) }
	var out []string
	if !nodeHasFabric() && !has("OMPI_MCA_pml") {
		out = append(out, "OMPI_MCA_pml=^cm")
	}
	// The node's cached topology spares every rank's hwloc a probe of the
	// machine (about 25 ms per Open MPI rank here).
	if topoXML != "" && !has("HWLOC_XMLFILE") {
		if _, err := os.Stat(topoXML); err == nil {
			out = append(out, "HWLOC_XMLFILE="+topoXML, "HWLOC_THISSYSTEM=1")
		}
	}
	return out
}
