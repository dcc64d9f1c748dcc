package jobspec

import (
	"reflect"
	"testing"
)

func TestRebase(t *testing.T) {
	j := &Job{
		Apps:   []App{{Hostfile: "hf1"}, {Hostfile: "/abs/hf2"}, {}},
		Place:  Placement{Hostfile: "hosts", Rankfile: "../rf", MapBy: MapPolicy{File: "seqf"}},
		Output: Output{Dir: "out", File: "/var/f"},
		Report: "r.json", ReportPID: "-", ReportURI: "+", OutputProctable: "pt",
		OutfilePattern: "o.%r", ErrfilePattern: "/e.%r",
	}
	j.Rebase("/home/u/w")
	want := &Job{
		Apps:   []App{{Hostfile: "/home/u/w/hf1"}, {Hostfile: "/abs/hf2"}, {}},
		Place:  Placement{Hostfile: "/home/u/w/hosts", Rankfile: "/home/u/rf", MapBy: MapPolicy{File: "/home/u/w/seqf"}},
		Output: Output{Dir: "/home/u/w/out", File: "/var/f"},
		Report: "/home/u/w/r.json", ReportPID: "-", ReportURI: "+", OutputProctable: "/home/u/w/pt",
		OutfilePattern: "/home/u/w/o.%r", ErrfilePattern: "/e.%r",
	}
	if !reflect.DeepEqual(j, want) {
		t.Errorf("Rebase:\n got %+v\nwant %+v", j, want)
	}
}
