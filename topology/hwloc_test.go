package topology

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The tests compare the model with hwloc's own tools. They fail, not skip,
// without them: `make test` installs hwloc, and a skipped comparison would
// hide a numbering drift.

func hwlocTool(t *testing.T, names ...string) string {
	t.Helper()
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	t.Fatalf("hwloc's %s is not installed (apt-get install hwloc)", names[0])
	return ""
}

// runHwloc runs an hwloc tool and returns its standard output.
func runHwloc(t *testing.T, tool string, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(hwlocTool(t, tool), args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", tool, args, err, stderr.String())
	}
	return out
}

func lstopo(t *testing.T, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath("lstopo-no-graphics"); err == nil {
		return runHwloc(t, "lstopo-no-graphics", args...)
	}
	return runHwloc(t, "lstopo", args...)
}

// mustXML parses hwloc's XML and checks the result against the cpusets and
// OS indexes the file itself states, so that comparisons through ParseXML
// do not rest on ParseXML alone.
func mustXML(t *testing.T, data []byte) *Topology {
	t.Helper()
	topo, err := ParseXML(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("ParseXML: %v", err)
	}
	want := xmlObjects(t, data)
	for typ := range numTypes {
		var got []string
		for i := range topo.Count(typ) {
			got = append(got, fmt.Sprintf("%d:%s", topo.Obj(typ, i).OSIndex, topo.CPUList(typ, i)))
		}
		slices.Sort(got)
		if typ != Machine && !slices.Equal(got, want[typ]) {
			t.Errorf("%s objects: model %v, XML says %v", typ, got, want[typ])
		}
	}
	return topo
}

// xmlObjects lists "os:cpus" of each modeled object of an hwloc 2 XML
// (without disallowed PUs), per type, sorted.
func xmlObjects(t *testing.T, data []byte) map[ObjType][]string {
	t.Helper()
	types := map[string]ObjType{"Package": Package, "NUMANode": NUMANode, "L3Cache": L3Cache,
		"L2Cache": L2Cache, "L1Cache": L1Cache, "Core": Core, "PU": PU}
	out := map[ObjType][]string{}
	dec := xml.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		se, ok := tok.(xml.StartElement)
		if !ok || se.Name.Local != "object" {
			continue
		}
		typ, ok := types[attr(se.Attr, "type")]
		if !ok {
			continue
		}
		cpus, err := parseHexMask(attr(se.Attr, "cpuset"))
		if err != nil {
			t.Fatal(err)
		}
		os := attr(se.Attr, "os_index")
		if os == "" {
			os = "-1"
		}
		out[typ] = append(out[typ], os+":"+cpus.String())
	}
	for _, l := range out {
		slices.Sort(l)
	}
	return out
}

// hwlocSpec is spec as hwloc accepts it: hwloc wants the PU level spelled out.
func hwlocSpec(spec string) string {
	fields := strings.Fields(spec)
	last := len(fields) - 1
	for last > 0 && strings.HasPrefix(fields[last], "[") { // attached memory
		last--
	}
	if !strings.HasPrefix(strings.ToLower(fields[last]), "pu:") {
		return spec + " pu:1"
	}
	return spec
}

// sameShape compares what a synthetic description keeps: the PUs in
// logical order, the objects of each type, and PU and NUMA numbers.
func sameShape(a, b *Topology) bool {
	if !slices.Equal(a.pus, b.pus) {
		return false
	}
	for typ := range numTypes {
		la, lb := &a.levels[typ], &b.levels[typ]
		if !slices.Equal(la.first, lb.first) || !slices.Equal(la.count, lb.count) {
			return false
		}
		if typ == NUMANode && !slices.Equal(la.os, lb.os) {
			return false
		}
	}
	return true
}
