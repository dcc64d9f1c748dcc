package jobspec

import (
	"reflect"
	"strings"
	"testing"

	"prun/topology"
)

func TestParseMapBy(t *testing.T) {
	for _, c := range []struct {
		in   string
		want MapPolicy
	}{
		{"core", MapPolicy{By: MapCore}},
		{"CORE", MapPolicy{By: MapCore}},
		{"c", MapPolicy{By: MapCore}},
		{"nu", MapPolicy{By: MapNUMA}},
		{"no", MapPolicy{By: MapNode}},
		{"L1", MapPolicy{By: MapL1Cache}},
		{"l3cache", MapPolicy{By: MapL3Cache}},
		{"socket", MapPolicy{By: MapPackage}},
		// Hydra's
		{"machine", MapPolicy{By: MapSlot}},
		{"core:1", MapPolicy{By: MapCore}},
		{"core:2", MapPolicy{By: MapSlot, PE: 2}},
		{"hwthread:3:OVERSUBSCRIBE", MapPolicy{By: MapSlot, PE: 3, HWTCPUS: true, Oversubscribe: true}},
		{"hwt", MapPolicy{By: MapHWThread}},
		{"seq", MapPolicy{By: MapSeq}},
		{"se:file=/tmp/Hosts", MapPolicy{By: MapSeq, File: "/tmp/Hosts"}},
		{"rankfile:FILE=rf", MapPolicy{By: MapRankfile, File: "rf"}},
		{"ppr:2:package", MapPolicy{By: MapPPR, PPR: 2, PPRObject: topology.Package}},
		{"PPR:1:node:oversubscribe", MapPolicy{By: MapPPR, PPR: 1, PPRObject: topology.Machine, Oversubscribe: true}},
		{"ppr:4:socket", MapPolicy{By: MapPPR, PPR: 4, PPRObject: topology.Package}},
		{"ppr:4:thread", MapPolicy{By: MapPPR, PPR: 4, PPRObject: topology.PU}},
		{"pe-list=0,2-3", MapPolicy{By: MapPEList, PEList: topology.CPUSet{0, 2, 3}}},
		{"pe-list=3,0:ordered", MapPolicy{By: MapPEList, PEList: topology.CPUSet{0, 3}, Ordered: true}},
		{"package:PE=4:SPAN", MapPolicy{By: MapPackage, PE: 4, Span: true}},
		{"slot:pe=2:hwtcpus", MapPolicy{By: MapSlot, PE: 2, HWTCPUS: true}},
		{":OVERSUBSCRIBE", MapPolicy{Oversubscribe: true}},
		{":nooversubscribe", MapPolicy{NoOversubscribe: true}},
		{"node:NOLOCAL", MapPolicy{By: MapNode, NoLocal: true}},
		{"core:nol", MapPolicy{By: MapCore, NoLocal: true}},
		{"core:corecpus", MapPolicy{By: MapCore, CoreCPUs: true}},
	} {
		got, err := ParseMapBy(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseMapBy(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
			continue
		}
		back, err := ParseMapBy(got.String())
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("%q: String() = %q reads back as %+v, %v", c.in, got.String(), back, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		parse func(string) error
		in    string
		want  string
	}{
		{mapBy, "", `--map-by "": empty policy`},
		{mapBy, "n", `--map-by "n": ambiguous policy "n": numa or node`},
		{mapBy, "s", `--map-by "s": ambiguous policy "s": slot, seq or package`},
		{mapBy, "p", `--map-by "p": ambiguous policy "p": package, ppr or pe-list`},
		{mapBy, "l", `--map-by "l": ambiguous policy "l": l1cache, l2cache or l3cache`},
		{mapBy, "board", `--map-by "board": unknown policy "board" (want slot, hwthread, core, l1cache, l2cache, l3cache, numa, package, node, seq, ppr, rankfile or pe-list)`},
		{mapBy, "core=2", `--map-by "core=2": core takes no value`},
		{mapBy, "ppr", `--map-by "ppr": ppr needs a pattern: ppr:N:RESOURCE`},
		{mapBy, "ppr:2", `--map-by "ppr:2": ppr needs a pattern: ppr:N:RESOURCE`},
		{mapBy, "ppr:0:core", `--map-by "ppr:0:core": ppr "0": want a number from 1 to 1048576`},
		{mapBy, "ppr:-1:core", `--map-by "ppr:-1:core": ppr "-1": want a positive number`},
		{mapBy, "ppr:2:gpu", `--map-by "ppr:2:gpu": unknown ppr resource "gpu" (want node, hwthread, core, package, numa, l1cache, l2cache or l3cache)`},
		{mapBy, "ppr:2:l", `--map-by "ppr:2:l": ambiguous ppr resource "l": l1cache, l2cache or l3cache`},
		{mapBy, "pe-list", `--map-by "pe-list": pe-list needs a CPU list: pe-list=0,2-3`},
		{mapBy, "pe-list=a", `--map-by "pe-list=a": pe-list="a": want a CPU list like 0,2-3`},
		{mapBy, "core:", `--map-by "core:": empty qualifier`},
		{mapBy, "core:o", `--map-by "core:o": ambiguous qualifier "o": OVERSUBSCRIBE or ORDERED`},
		{mapBy, "core:n", `--map-by "core:n": ambiguous qualifier "n": NOOVERSUBSCRIBE or NOLOCAL`},
		{mapBy, "core:pe", `--map-by "core:pe": qualifier PE needs a value: PE=...`},
		{mapBy, "core:span=1", `--map-by "core:span=1": qualifier SPAN takes no value`},
		{mapBy, "core:PE=0", `--map-by "core:PE=0": PE "0": want a number from 1 to 1048576`},
		{mapBy, "core:span:span", `--map-by "core:span:span": qualifier SPAN given twice`},
		{mapBy, "core:bogus", `--map-by "core:bogus": unknown qualifier "bogus" (want PE, SPAN, OVERSUBSCRIBE, NOOVERSUBSCRIBE, NOLOCAL, HWTCPUS, CORECPUS, ORDERED or FILE)`},
		{mapBy, ":oversubscribe:nooversubscribe", `--map-by ":oversubscribe:nooversubscribe": OVERSUBSCRIBE and NOOVERSUBSCRIBE contradict each other`},
		{mapBy, "core:hwtcpus:corecpus", `--map-by "core:hwtcpus:corecpus": HWTCPUS and CORECPUS contradict each other`},
		{mapBy, "slot:span", `--map-by "slot:span": SPAN cannot be used with slot`},
		{mapBy, "ppr:1:node:span", `--map-by "ppr:1:node:span": SPAN cannot be used with ppr`},
		{mapBy, "rankfile:pe=2", `--map-by "rankfile:pe=2": PE cannot be used with rankfile`},
		{mapBy, "core:ordered", `--map-by "core:ordered": ORDERED applies to pe-list only`},
		{mapBy, "core:file=x", `--map-by "core:file=x": FILE applies to seq and rankfile only`},
		{mapBy, "core\n", `--map-by "core\n": unknown policy "core\n" (want slot, hwthread, core, l1cache, l2cache, l3cache, numa, package, node, seq, ppr, rankfile or pe-list)`},
		{rankBy, "", `--rank-by "": empty policy`},
		{rankBy, "s", `--rank-by "s": ambiguous policy "s": slot, span or package`},
		{rankBy, "board", `--rank-by "board": unknown policy "board" (want slot, node, fill, span, hwthread, core, l1cache, l2cache, l3cache, numa or package)`},
		{rankBy, "n", `--rank-by "n": ambiguous policy "n": node or numa`},
		{rankBy, "fill:x", `--rank-by "fill:x": ranking by fill takes no qualifiers`},
		{rankBy, "slot:", `--rank-by "slot:": ranking by slot takes no qualifiers`},
		{rankBy, "core:", `--rank-by "core:": empty qualifier`},
		{rankBy, "core:x", `--rank-by "core:x": unknown qualifier "x" (want span or fill)`},
		{rankBy, "core:span:fill", `--rank-by "core:span:fill": give span or fill, not both`},
		{rankBy, "core:span:SPAN", `--rank-by "core:span:SPAN": qualifier span given twice`},
		{bindTo, "", `--bind-to "": empty policy`},
		{bindTo, "n", `--bind-to "n": ambiguous policy "n": none or numa`},
		{bindTo, "board", `--bind-to "board": unknown policy "board" (want none, hwthread, core, l1cache, l2cache, l3cache, numa or package)`},
		{bindTo, "core:x", `--bind-to "core:x": unknown qualifier "x" (want overload-allowed, no-overload, if-supported or report)`},
		{bindTo, "core:overload-allowed:no-overload", `--bind-to "core:overload-allowed:no-overload": overload-allowed and no-overload contradict each other`},
		{bindTo, "core:report:r", `--bind-to "core:report:r": qualifier report given twice`},
	} {
		err := c.parse(c.in)
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: err = %v\nwant %s", c.in, err, c.want)
		}
	}
}

func mapBy(s string) error  { _, err := ParseMapBy(s); return err }
func rankBy(s string) error { _, err := ParseRankBy(s); return err }
func bindTo(s string) error { _, err := ParseBindTo(s); return err }

func TestParseRankByAndBindTo(t *testing.T) {
	for in, want := range map[string]RankPolicy{
		"slot": {By: RankSlot}, "NODE": {By: RankNode}, "f": {By: RankFill}, "sp": {By: RankSpan}, "sl": {By: RankSlot},
		"core": {By: RankObject, Obj: topology.Core}, "SOCKET": {By: RankObject, Obj: topology.Package},
		"so:span": {By: RankObject, Obj: topology.Package, Span: true}, "nu:F": {By: RankObject, Obj: topology.NUMANode, Fill: true},
		"hwthread": {By: RankObject, Obj: topology.PU}, "l3": {By: RankObject, Obj: topology.L3Cache},
	} {
		if got, err := ParseRankBy(in); err != nil || got != want {
			t.Errorf("ParseRankBy(%q) = %v, %v", in, got, err)
		}
	}
	for in, want := range map[string]BindPolicy{
		"none":                         {To: BindNone},
		"hwt":                          {To: BindHWThread},
		"c":                            {To: BindCore},
		"l2":                           {To: BindL2Cache},
		"nu":                           {To: BindNUMA},
		"socket":                       {To: BindPackage},
		"core:overload-allowed":        {To: BindCore, OverloadAllowed: true},
		"package:if-supported:REPORT":  {To: BindPackage, IfSupported: true, Report: true},
		":overload-allowed":            {OverloadAllowed: true},
		"core:no-overload":             {To: BindCore, NoOverload: true},
		"l3cache:o:i:r":                {To: BindL3Cache, OverloadAllowed: true, IfSupported: true, Report: true},
		"numa:overload-allowed:report": {To: BindNUMA, OverloadAllowed: true, Report: true},
		// Hydra's
		"machine":           {To: BindNone},
		"rr":                {To: BindRR},
		"user:2+0, 1,3+3":   {To: BindUser, User: "0+2,1,3"},
		"core:2":            {To: BindCore, Count: 2},
		"hwthread:4:report": {To: BindHWThread, Count: 4, Report: true},
		"socket:1":          {To: BindPackage, Count: 1},
	} {
		got, err := ParseBindTo(in)
		if err != nil || got != want {
			t.Errorf("ParseBindTo(%q) = %+v, %v", in, got, err)
		}
		if back, err := ParseBindTo(got.String()); err != nil || back != got {
			t.Errorf("%q: String() = %q reads back as %+v, %v", in, got.String(), back, err)
		}
	}
}

func TestParseHydraBindErrors(t *testing.T) {
	for in, want := range map[string]string{
		"socket:2":  `--bind-to "socket:2": package:2: prun binds a process to 2 cores (core:2) or hwthreads (hwthread:2), or to one package`,
		"user:":     `--bind-to "user:": user: needs CPU numbers (user:0+2,1+3)`,
		"user:0,x":  `--bind-to "user:0,x": user:0,x: "x" is not a CPU number`,
		"user:0,,1": `--bind-to "user:0,,1": user:0,,1: "" is not a CPU number`,
		"core:0":    `--bind-to "core:0": core:N "0": want a number from 1 to 1048576`,
	} {
		if _, err := ParseBindTo(in); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
	for in, want := range map[string]string{
		"socket:2":    `--map-by "socket:2": package:2: prun maps 2 cores (core:2) or hwthreads (hwthread:2) to a process, or one package`,
		"core:2:PE=3": `--map-by "core:2:PE=3": qualifier PE given twice`,
	} {
		if _, err := ParseMapBy(in); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %q", in, err, want)
		}
	}
}

func TestParseMemBind(t *testing.T) {
	good := map[string]MemPolicy{
		"firsttouch":       {Mode: MemFirstTouch},
		"bind":             {Mode: MemBind},
		"Interleave":       {Mode: MemInterleave},
		"bind:1":           {Mode: MemBind, Nodes: topology.CPUSet{1}},
		"interleave:3,0-1": {Mode: MemInterleave, Nodes: topology.CPUSet{0, 1, 3}},
	}
	for in, want := range good {
		got, err := ParseMemBind(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %+v, %v; want %+v", in, got, err, want)
		}
	}
	bad := map[string]string{
		"":              "unknown policy",
		"nexttouch":     "Linux has no nexttouch policy",
		"replicate:0":   "Linux has no replicate policy",
		"firsttouch:0":  "firsttouch takes no NUMA nodes",
		"bind:":         "want NUMA node numbers",
		"interleave:x":  "want NUMA node numbers",
		"interleave:-1": "want NUMA node numbers",
		"pack":          "unknown policy",
	}
	for in, want := range bad {
		if _, err := ParseMemBind(in); err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "-membind ") {
			t.Errorf("%q: %v, want an error with %q", in, err, want)
		}
	}
}

// FuzzParsePolicies checks that the parsers (--map-by, --rank-by,
// --bind-to, -membind) never panic, answer one-line
// errors, and read back what String writes.
func FuzzParsePolicies(f *testing.F) {
	for _, s := range []string{"core", "ppr:2:package:PE=2", "pe-list=0,2-3:ordered", ":OVERSUBSCRIBE", "n", "slot:SPAN",
		"rankfile:file=a:b", "core:overload-allowed:report", "fill", "", ":", "ppr:9999999999:core", "pe-list=0-99999999",
		"interleave:0-1,3", "bind", "firsttouch", "nexttouch", "bind:99999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if p, err := ParseMapBy(s); err != nil {
			oneLine(t, err)
		} else if !strings.Contains(p.File, ":") {
			back, err := ParseMapBy(p.String())
			if err != nil || !reflect.DeepEqual(back, p) {
				t.Fatalf("%q: String() = %q reads back as %+v, %v", s, p.String(), back, err)
			}
		}
		if r, err := ParseRankBy(s); err != nil {
			oneLine(t, err)
		} else if back, err := ParseRankBy(r.String()); err != nil || back != r {
			t.Fatalf("%q: rank %v reads back as %v, %v", s, r, back, err)
		}
		if p, err := ParseMemBind(s); err != nil {
			oneLine(t, err)
		} else if back, err := ParseMemBind(p.String()); err != nil || !reflect.DeepEqual(back, p) {
			t.Fatalf("%q: membind %q reads back as %+v, %v", s, p.String(), back, err)
		}
		if b, err := ParseBindTo(s); err != nil {
			oneLine(t, err)
		} else if b != (BindPolicy{}) {
			if back, err := ParseBindTo(b.String()); err != nil || back != b {
				t.Fatalf("%q: bind %q reads back as %+v, %v", s, b.String(), back, err)
			}
		}
	})
}

func oneLine(t *testing.T, err error) {
	t.Helper()
	if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || msg == "" || len(msg) > 1024 {
		t.Fatalf("error is not one short line: %q", msg)
	}
}
