package topology

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Discover reads this node's topology from Linux sysfs, restricted to the
// CPUs this process may use (its affinity, the Cpus_allowed_list of /proc/self/status: the
// cgroup cpuset and affinity the ranks will inherit). It finds what hwloc
// finds for packages, cores, PUs, L1d/L2/L3 caches and NUMA nodes, with the
// same logical order, without hwloc; NUMA nodes without allowed CPUs are
// left out (hwloc may keep CPU-less memory nodes).
func Discover() (*Topology, error) {
	return discover("/", processCPUs())
}

// allowedCPUSet reads Cpus_allowed_list; nil means no restriction known.
func allowedCPUSet(status string) (CPUSet, error) {
	f, err := os.Open(status)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Cpus_allowed_list:"); ok {
			return ParseCPUSet(v)
		}
	}
	return nil, nil
}

// sysObj is an object found in sysfs: a type and the CPUs it covers.
type sysObj struct {
	typ  ObjType // noType for dies and clusters, which only shape the order
	os   int
	cpus CPUSet
}

// discover reads the sysfs below root (a test points it at a fake tree).
func discover(root string, allowed CPUSet) (*Topology, error) {
	cpuDir := filepath.Join(root, "sys/devices/system/cpu")
	online, err := readList(filepath.Join(cpuDir, "online"))
	if err != nil {
		return nil, fmt.Errorf("sysfs: %v", err)
	}
	pus := online
	if allowed != nil {
		pus = online.Intersect(allowed)
	}
	if len(pus) == 0 {
		return nil, fmt.Errorf("sysfs: no usable CPU (online %s, allowed %s)", online, allowed)
	}
	found := map[string]*sysObj{}
	add := func(typ ObjType, os int, cpus CPUSet, cpu int) {
		cpus = cpus.Intersect(pus)
		if !cpus.Contains(cpu) {
			return // inconsistent sysfs: ignore rather than guess
		}
		key := strconv.Itoa(int(typ)) + ":" + cpus.String()
		if typ == noType {
			key += ":" + strconv.Itoa(os)
		}
		if found[key] == nil {
			found[key] = &sysObj{typ, os, cpus}
		}
	}
	for _, cpu := range pus {
		dir := filepath.Join(cpuDir, "cpu"+strconv.Itoa(cpu))
		top := filepath.Join(dir, "topology")
		for _, o := range []struct {
			typ   ObjType
			id    string
			lists []string // newest name first
		}{
			{Package, "physical_package_id", []string{"package_cpus_list", "core_siblings_list"}},
			{noType, "die_id", []string{"die_cpus_list"}},
			{noType, "cluster_id", []string{"cluster_cpus_list"}},
			{Core, "core_id", []string{"core_cpus_list", "thread_siblings_list"}},
		} {
			for _, l := range o.lists {
				if cpus, err := readList(filepath.Join(top, l)); err == nil {
					add(o.typ, readInt(filepath.Join(top, o.id)), cpus, cpu)
					break
				}
			}
		}
		caches, _ := filepath.Glob(filepath.Join(dir, "cache", "index[0-9]*"))
		for _, c := range caches {
			typ := cacheLevel(c)
			if typ == noType {
				continue
			}
			if cpus, err := readList(filepath.Join(c, "shared_cpu_list")); err == nil {
				add(typ, readInt(filepath.Join(c, "id")), cpus, cpu)
			}
		}
	}
	nodes, _ := filepath.Glob(filepath.Join(root, "sys/devices/system/node/node[0-9]*"))
	for _, n := range nodes {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(n), "node"))
		if err != nil {
			continue
		}
		cpus, err := readList(filepath.Join(n, "cpulist"))
		if err != nil || len(cpus.Intersect(pus)) == 0 {
			continue
		}
		add(NUMANode, id, cpus, cpus.Intersect(pus)[0])
	}
	objs := make([]*sysObj, 0, len(found))
	for _, o := range found {
		objs = append(objs, o)
	}
	return build(nest(objs, pus), nil)
}

// cacheLevel maps a sysfs cache directory to a type: L1 data (or unified),
// L2, L3; instruction caches and L4 are not placement targets.
func cacheLevel(dir string) ObjType {
	kind, _ := os.ReadFile(filepath.Join(dir, "type"))
	if strings.TrimSpace(string(kind)) == "Instruction" {
		return noType
	}
	switch readInt(filepath.Join(dir, "level")) {
	case 1:
		return L1Cache
	case 2:
		return L2Cache
	case 3:
		return L3Cache
	}
	return noType
}

// nest builds the tree the way hwloc inserts objects by cpuset: larger sets
// first, equal sets in ObjType order (a package holding exactly one NUMA
// node is its parent), each below the smallest object holding its CPUs. An
// object that overlaps another without nesting is dropped, as hwloc drops
// it (after complaining about the operating system).
func nest(objs []*sysObj, pus CPUSet) *node {
	slices.SortFunc(objs, func(a, b *sysObj) int {
		if len(a.cpus) != len(b.cpus) {
			return len(b.cpus) - len(a.cpus)
		}
		if a.typ != b.typ {
			return int(a.typ) - int(b.typ)
		}
		if a.cpus[0] != b.cpus[0] {
			return a.cpus[0] - b.cpus[0]
		}
		return a.os - b.os
	})
	root := &node{typ: Machine, os: 0}
	owner := make(map[int]*node, len(pus))
	for _, c := range pus {
		owner[c] = root
	}
next:
	for _, o := range objs {
		parent := owner[o.cpus[0]]
		for _, c := range o.cpus {
			if owner[c] != parent {
				continue next
			}
		}
		n := &node{typ: o.typ, os: o.os}
		parent.children = append(parent.children, n)
		for _, c := range o.cpus {
			owner[c] = n
		}
	}
	for _, c := range pus {
		owner[c].children = append(owner[c].children, &node{typ: PU, os: c})
	}
	return root
}

func readList(path string) (CPUSet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseCPUSet(string(b))
}

// readInt returns -1 when the file is missing or not a number (some
// platforms write -1 for an unknown package id).
func readInt(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 {
		return -1
	}
	return n
}
