package cli

import (
	"reflect"
	"strings"
	"testing"

	"prun/jobspec"
	"prun/topology"
)

func TestApplyCompat(t *testing.T) {
	var o jobspec.Placement
	for _, s := range []string{"--npernode=2", "--oversubscribe", "--nolocal", "--use-hwthread-cpus", "--cpus-per-proc=2", "--report-bindings", "--bind-to-core"} {
		name, val, _ := strings.Cut(s, "=")
		if err := ApplyCompat(&o, name, val); err != nil {
			t.Fatal(err)
		}
	}
	want := jobspec.MapPolicy{By: jobspec.MapPPR, PPR: 2, PPRObject: topology.Machine, Oversubscribe: true, NoLocal: true, HWTCPUS: true, PE: 2}
	if !reflect.DeepEqual(o.MapBy, want) || o.BindTo != (jobspec.BindPolicy{To: jobspec.BindCore, Report: true}) {
		t.Errorf("options = %+v", o)
	}
	for _, c := range []struct{ name, val, want string }{
		{"--bynode", "", "--bynode conflicts with --map-by ppr:2:node:PE=2:OVERSUBSCRIBE:NOLOCAL:HWTCPUS"},
		{"-N", "3", "-N 3 conflicts with --map-by ppr:2:node:PE=2:OVERSUBSCRIBE:NOLOCAL:HWTCPUS"},
		{"--cpus-per-rank", "4", "--cpus-per-rank 4 conflicts with PE=2"},
		{"--bind-to-socket", "", "--bind-to-socket conflicts with --bind-to core"},
		{"--nooversubscribe", "", "--nooversubscribe: OVERSUBSCRIBE and NOOVERSUBSCRIBE contradict each other"},
		{"--pernode", "1", "--pernode takes no value"},
		{"--npernode", "", "--npernode needs a value"},
		{"--npernode", "x", `--npernode "x": want a positive number`},
		{"--frobnicate", "", `unknown option "--frobnicate"`},
	} {
		err := ApplyCompat(&o, c.name, c.val)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s %s: err = %v\nwant %s", c.name, c.val, err, c.want)
		}
	}
	// Same policy twice is fine; so is -N after --map-by ppr:N:node.
	o = jobspec.Placement{}
	if err := ApplyCompat(&o, "-N", "2"); err != nil {
		t.Fatal(err)
	}
	if err := ApplyCompat(&o, "--npernode", "2"); err != nil {
		t.Fatal(err)
	}
	o = jobspec.Placement{MapBy: jobspec.MapPolicy{By: jobspec.MapPackage}}
	if err := ApplyCompat(&o, "--bysocket", ""); err != nil || o.MapBy.By != jobspec.MapPackage {
		t.Fatal(err)
	}
	// Open MPI 4's --ppr N:RESOURCE is --map-by ppr:N:RESOURCE.
	o = jobspec.Placement{}
	if err := ApplyCompat(&o, "--ppr", "2:package"); err != nil || !reflect.DeepEqual(o.MapBy, jobspec.MapPolicy{By: jobspec.MapPPR, PPR: 2, PPRObject: topology.Package}) {
		t.Fatalf("--ppr 2:package: %v %+v", err, o.MapBy)
	}
	for _, v := range []string{"2", "x:core", "2:core:PE=2", "2:frob"} {
		if err := ApplyCompat(&jobspec.Placement{}, "--ppr", v); err == nil || !strings.Contains(err.Error(), "want N:RESOURCE") {
			t.Errorf("--ppr %s: err = %v", v, err)
		}
	}
	o = jobspec.Placement{MapBy: jobspec.MapPolicy{By: jobspec.MapCore}}
	if err := ApplyCompat(&o, "--ppr", "1:core"); err == nil || !strings.Contains(err.Error(), "conflicts with --map-by core") {
		t.Errorf("--ppr after --map-by core: %v", err)
	}
}
