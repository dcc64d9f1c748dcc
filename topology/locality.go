package topology

import "strings"

// localityPrefix names a level in a PMIx/Open MPI locality string.
var localityPrefix = map[ObjType]string{Package: "SK", L3Cache: "L3", L2Cache: "L2", L1Cache: "L1", Core: "CR", PU: "HT", NUMANode: "NM"}

// Locality is the PMIX_LOCALITY_STRING of a process bound to cpus (OS CPU
// numbers; nil or empty: every CPU of the node): for each level, the logical
// indexes of the objects the binding touches, as "SK0:L30:L20-1:CR0-1:HT0-1:NM0".
// Open MPI compares two such strings level by level to learn how close two
// processes are. (libpmix 4.2.2's own generator mislabels the objects.)
func (t *Topology) Locality(cpus CPUSet) string {
	logical := make(map[int]int, t.NumPUs())
	for pu := 0; pu < t.NumPUs(); pu++ {
		logical[t.CPU(pu)] = pu
	}
	var pus []int
	if len(cpus) == 0 {
		for pu := 0; pu < t.NumPUs(); pu++ {
			pus = append(pus, pu)
		}
	} else {
		for _, c := range cpus {
			if pu, ok := logical[c]; ok {
				pus = append(pus, pu)
			}
		}
	}
	var parts []string
	for _, typ := range []ObjType{Package, L3Cache, L2Cache, L1Cache, Core, PU, NUMANode} {
		if t.Count(typ) == 0 {
			continue
		}
		seen := map[int]bool{}
		var idx []int
		for _, pu := range pus {
			if i := t.Enclosing(typ, pu); i >= 0 && !seen[i] {
				seen[i] = true
				idx = append(idx, i)
			}
		}
		if len(idx) > 0 {
			parts = append(parts, localityPrefix[typ]+sortedSet(idx).String())
		}
	}
	return strings.Join(parts, ":")
}
