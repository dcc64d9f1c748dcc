package daemon

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"prun/jobspec"
	"prun/mapper"
	"prun/pmixsrv"
)

// every is a string of every byte value from 1 to 255.
func every() string {
	var b strings.Builder
	for i := 1; i < 256; i++ {
		b.WriteByte(byte(i))
	}
	return b.String()
}

// The user's bytes in a plan and in a spawn request survive JSON, and every
// other field still travels.
func TestPlanJSONBytes(t *testing.T) {
	x := "x\xffy" + every()
	p := Plan{Nspace: "prun.1", JobID: "1", Index: 2, UnivSize: 3, DebugStop: true, Stdin: StdinAll, PTY: true,
		Job: &jobspec.Job{Apps: []jobspec.App{{Argv: []string{"./a", x}, Exe: "/bin/\xfe", NP: 2, Env: []string{"V4=a\xff\xfeb", x + "=" + x},
			Wdir: "/tmp/\xe9", EnvNone: true, Hosts: "h\xff", Hostfile: "/f\xff"}},
			CmdLine: "prun " + x, Output: jobspec.Output{Tag: true}, Stdin: jobspec.StdinNone, PreloadFiles: []string{"/p/\xff"}, MaxRestarts: 4},
		Map:    &mapper.Map{Slots: 7},
		Parent: &pmixsrv.Proc{Nspace: "p", Rank: 1}, ParentKVS: "k\xff", Preput: [][2]string{{"k", "v\xff"}, {"\xfe", "w"}},
		Programs: []File{{ID: 1, Name: "a\xff", Mode: 0o755, Size: 9, Sum: "00"}}, Files: []File{{ID: 2, Name: "f\xfe"}},
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var q Plan
	if err := json.Unmarshal(b, &q); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, q) {
		t.Errorf("plan came back as\n%+v\n%+v\nwant\n%+v\n%+v\nvia %s", q, *q.Job, p, *p.Job, b)
	}
	// Valid UTF-8 stays readable.
	b, _ = json.Marshal(Plan{Job: &jobspec.Job{Apps: []jobspec.App{{Argv: []string{"./é"}}}}})
	if !strings.Contains(string(b), `"Argv":["./é"]`) {
		t.Errorf("plain argv not plain: %s", b)
	}

	a := SpawnApp{Cmd: "/c\xff", Argv: []string{"c", x}, Env: []string{"A=\xff"}, Cwd: "/w\xff", NP: 3, Hosts: "h", Hostfile: "/h\xff", Path: "/p\xfe"}
	if b, err = json.Marshal([]SpawnApp{a}); err != nil {
		t.Fatal(err)
	}
	var as []SpawnApp
	if err := json.Unmarshal(b, &as); err != nil || len(as) != 1 || !reflect.DeepEqual(as[0], a) {
		t.Errorf("spawn app came back as %+v, %v; want %+v (via %s)", as, err, a, b)
	}
}
