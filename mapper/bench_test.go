package mapper

import (
	"fmt"
	"testing"

	"prun/hostfile"
	"prun/jobspec"
	"prun/topology"
)

// BenchmarkPlaceMillion maps 1,000,000 processes onto 10,000 nodes of
// 2 packages x 2 NUMA x 16 cores x 2 hwthreads sharing one *Topology,
// 100 slots each.
func BenchmarkPlaceMillion(b *testing.B) {
	t, err := topology.ParseSynthetic(refNode)
	if err != nil {
		b.Fatal(err)
	}
	var alloc hostfile.Allocation
	for i := range 10000 {
		alloc.Hosts = append(alloc.Hosts, hostfile.Host{Name: fmt.Sprintf("n%05d", i), Slots: 100})
	}
	topo := func(string) *topology.Topology { return t }
	for _, c := range []struct{ name, mapBy, bindTo, rankBy string }{
		{"hwthread", ":HWTCPUS", "", ""}, // each process bound to its own hwthread
		{"core-overload", "core", "core:overload-allowed", ""},
		{"package", "package", "package:overload-allowed", ""},
		{"node", "node", "", ""},
		{"package-span", "package:SPAN", "package:overload-allowed", ""},
		{"ppr-25-numa", "ppr:25:numa:HWTCPUS", "", ""},
		{"slot-pe1", "slot:PE=1:HWTCPUS", "", ""},
		{"hwthread-rank-package", ":HWTCPUS", "", "package"}, // Open MPI 4's --rank-by OBJECT
		{"package-rank-core-span", "package", "package:overload-allowed", "core:span"},
	} {
		var opts Options
		if opts.MapBy, err = jobspec.ParseMapBy(c.mapBy); err != nil {
			b.Fatal(err)
		}
		if c.rankBy != "" {
			if opts.RankBy, err = jobspec.ParseRankBy(c.rankBy); err != nil {
				b.Fatal(err)
			}
		}
		if c.bindTo != "" {
			if opts.BindTo, err = jobspec.ParseBindTo(c.bindTo); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var m *Map
			for b.Loop() {
				j := &jobspec.Job{Apps: []jobspec.App{{NP: 1000000, Argv: []string{"a"}}}}
				if m, err = PlaceWith(j, alloc, topo, opts); err != nil {
					b.Fatal(err)
				}
			}
			if len(m.Procs) != 1000000 || len(m.Nodes) != 10000 {
				b.Fatalf("%d procs on %d nodes", len(m.Procs), len(m.Nodes))
			}
		})
	}
}
