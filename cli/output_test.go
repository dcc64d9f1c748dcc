package cli

import (
	"strings"
	"testing"

	"prun/jobspec"
)

func TestParseOutput(t *testing.T) {
	var o jobspec.Output
	if err := parseOutput("tag,timestamp, merge-stderr-to-stdout,dir=/x:nocopy,file=p,json,ordered,rank,tag-detailed", &o); err != nil {
		t.Fatal(err)
	}
	want := jobspec.Output{Tag: true, Timestamp: true, MergeStderr: true, Dir: "/x", File: "p", JSON: true, Ordered: true, Rank: true, TagDetailed: true}
	// The terminal keeps a copy unless every dir and file says :nocopy.
	for spec, tee := range map[string]bool{"dir=d": true, "dir=d:NoCopy": false, "dir=d:nocopy,file=f": true, "file=f:nocopy": false, "tag": false} {
		var o jobspec.Output
		if err := parseOutput(spec, &o); err != nil || o.Tee != tee || strings.HasSuffix(o.Dir+o.File, "copy") {
			t.Errorf("%q: %+v, %v; want Tee %v", spec, o, err, tee)
		}
	}
	if o.Tag != want.Tag || o.Timestamp != want.Timestamp || o.MergeStderr != want.MergeStderr || o.Dir != want.Dir ||
		o.File != want.File || o.JSON != want.JSON || o.Ordered != want.Ordered || o.Rank != want.Rank || o.TagDetailed != want.TagDetailed {
		t.Errorf("got %+v", o)
	}
	if o := (jobspec.Output{}); parseOutput("xml", &o) != nil || !o.XML {
		t.Errorf("xml: %+v", o)
	}
	for _, bad := range []string{"xmll", "json,xml", "dir", "file=", "tag=1"} {
		if err := parseOutput(bad, &jobspec.Output{}); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
