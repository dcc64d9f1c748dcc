package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Open MPI start-up defaults. On a node with no high-speed fabric, Open MPI
// still probes its "cm" PML (PSM2/OFI/portals MTLs) and its "ucx" PML in
// every rank, though neither can be selected there (ucx declines a node
// without a fabric device), and both probes cost every rank start-up time
// (docs/benchmarks.md, "Where the time goes"). prun excludes both on such
// nodes. Whatever the user set wins: these apply only
// to variables absent from the launcher's environment, and a user who tunes
// the ucx PML keeps it.

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
func tuningEnv(base []string, topoXML string, net *Network) []string {
	has := func(name string) bool { return envHas(base, name) }
	var out []string
	// A job across nodes: the MPI libraries' transports take the network
	// the control plane uses, instead of guessing (Open MPI's TCP BTL may
	// pick loopback or a network the other nodes cannot reach).
	if net != nil {
		for _, kv := range []string{
			"OMPI_MCA_btl_tcp_if_include=" + net.CIDR,
			"OMPI_MCA_oob_tcp_if_include=" + net.CIDR,
			"UCX_NET_DEVICES=" + net.Iface,
			"MPIR_CVAR_CH3_INTERFACE_HOSTNAME=" + net.IP,
			"MPIR_CVAR_CH4_NETMOD_TCP_IFACE=" + net.Iface,
		} {
			if k, _, _ := strings.Cut(kv, "="); !has(k) {
				out = append(out, kv)
			}
		}
	}
	if !nodeHasFabric() && !has("OMPI_MCA_pml") {
		pml := "OMPI_MCA_pml=^ucx,cm"
		for _, kv := range base {
			if strings.HasPrefix(kv, "OMPI_MCA_pml_ucx_") {
				pml = "OMPI_MCA_pml=^cm"
			}
		}
		out = append(out, pml)
	}
	// The node's cached topology spares every rank's hwloc a probe of the
	// machine.
	if topoXML != "" && !has("HWLOC_XMLFILE") {
		if _, err := os.Stat(topoXML); err == nil {
			for _, kv := range xmlTopologyEnv(topoXML) {
				if k, _, _ := strings.Cut(kv, "="); !has(k) {
					out = append(out, kv)
				}
			}
		}
	}
	return out
}

// xmlTopologyEnv makes hwloc load the topology from an XML file instead of
// probing the machine. With the topology given, hwloc's discovery plugins
// are unused, yet loading them (OpenCL, X11 and libxml2/ICU libraries) is
// most of what remains of hwloc's start-up. The built-in XML parser reads
// hwloc's own XML.
func xmlTopologyEnv(path string) []string {
	return []string{
		"HWLOC_XMLFILE=" + path,
		"HWLOC_THISSYSTEM=1",
		"HWLOC_PLUGINS_BLACKLIST=hwloc_opencl,hwloc_gl,hwloc_pci,hwloc_xml_libxml",
	}
}
