package hostfile

import (
	"errors"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestExpandNodelist(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"node1", []string{"node1"}},
		{"a,b", []string{"a", "b"}},
		{"node[01-04,7],gpu[1-2]", []string{"node01", "node02", "node03", "node04", "node7", "gpu1", "gpu2"}},
		{"n[8-11]", []string{"n8", "n9", "n10", "n11"}},
		{"n[08-10]", []string{"n08", "n09", "n10"}},
		{"n[098-100]", []string{"n098", "n099", "n100"}},
		{"n[3]", []string{"n3"}},
		{"n[1-2]-ib", []string{"n1-ib", "n2-ib"}},
		{"r[1-2]n[1-2]", []string{"r1n1", "r1n2", "r2n1", "r2n2"}},
		{"[1-2]x", []string{"1x", "2x"}},
		{"c[1-2].example", []string{"c1.example", "c2.example"}},
		{"10.0.0.[1-2]", []string{"10.0.0.1", "10.0.0.2"}},
	}
	for _, tc := range tests {
		got, err := ExpandNodelist(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}

	errs := []struct{ in, want string }{
		{"", "empty nodelist"},
		{"a,,b", "empty host name in the list"},
		{"a,", "empty host name in the list"},
		{"n[1-2", "n[1-2: unclosed ["},
		{"a,n[1[2]]", "n[1[: nested ["},
		{"n]1", "n]: ] without ["},
		{"n[]", "n[]: empty []"},
		{"n[1-]", "n[1-]: [1-]: missing number"},
		{"n[a-b]", "n[a-b]: [a-b]: not a number"},
		{"n[1,,2]", "n[1,,2]: [\"\"]: missing number"},
		{"n[4-2]", "n[4-2]: [4-2]: range runs backwards"},
		{"n[1-2-3]", "n[1-2-3]: [1-2-3]: not a number"},
		{"n[0000000001]", "n[0000000001]: [0000000001]: number longer than 9 digits"},
		{"n[0-999999999]", "n[0-999999999]: expands to more than 131072 names"},
		{"a[0-999]b[0-999]", "a[0-999]b[0-999]: expands to more than 131072 names"},
		{"n[1-2],n2", "n2: n2 listed twice"},
		{"N1,n1", "n1: n1 listed twice"},
		{"bad name", `"bad name": "bad name": not a host name or address`},
		{"-n[1-2]", "-n[1-2]: -n1: host name starts with '-'"},
	}
	for _, tc := range errs {
		_, err := ExpandNodelist(tc.in)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.want)
		}
	}
}

func TestParseTasksPerNode(t *testing.T) {
	tests := []struct {
		in   string
		want []int
	}{
		{"4", []int{4}},
		{"2(x3),1", []int{2, 2, 2, 1}},
		{"1,2(x1),3", []int{1, 2, 3}},
	}
	for _, tc := range tests {
		got, err := ParseTasksPerNode(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %v, %v", tc.in, got, err)
		}
	}
	errs := []struct{ in, want string }{
		{"", "empty"},
		{"x", "x: count not a number"},
		{"0", "0: count must be at least 1"},
		{"2(x3", "2(x3: expected N or N(xM)"},
		{"2(3)", "2(3): expected N or N(xM)"},
		{"2(x)", "2(x): repeat missing number"},
		{"2(x0)", "2(x0): repeat must be at least 1"},
		{"(x2)", "(x2): count missing number"},
		{"1,,1", `"": count missing number`},
		{"1(x131072),1", "more than 131072 nodes"},
	}
	for _, tc := range errs {
		_, err := ParseTasksPerNode(tc.in)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: got %v, want %q", tc.in, err, tc.want)
		}
	}
}

type env map[string]string

func (e env) get(k string) string { return e[k] }

type files map[string]string

func (f files) read(name string) ([]byte, error) {
	s, ok := f[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return []byte(s), nil
}

func TestDetect(t *testing.T) {
	fsys := files{
		"/pbs/nodes":   "n1\nn2\nn1\n\nn1\n",
		"/pbs/v6":      "::1\r\n::1\r\n",
		"/pbs/empty":   "\n\n",
		"/pbs/bad":     "n1\nn2 n3\n",
		"/pbs/badname": "n1\n\nn$\n",
	}
	tests := []struct {
		name   string
		env    env
		want   []Entry
		source string
	}{
		{"nothing", env{"HOME": "/root"}, nil, ""},
		{"slurm", env{"SLURM_JOB_NODELIST": "node[01-03],gpu1", "SLURM_TASKS_PER_NODE": "2(x3),1"},
			[]Entry{named("node01", 2), named("node02", 2), named("node03", 2), named("gpu1", 1)}, Slurm},
		{"slurm old variable", env{"SLURM_NODELIST": "a,b", "SLURM_TASKS_PER_NODE": "1,3"},
			[]Entry{named("a", 1), named("b", 3)}, Slurm},
		{"slurm job nodelist first", env{"SLURM_JOB_NODELIST": "a", "SLURM_NODELIST": "b", "SLURM_TASKS_PER_NODE": "1"},
			[]Entry{named("a", 1)}, Slurm},
		{"slurm cpus per node", env{"SLURM_JOB_NODELIST": "a,b", "SLURM_JOB_CPUS_PER_NODE": "8(x2)"},
			[]Entry{named("a", 8), named("b", 8)}, Slurm},
		{"slurm tasks before cpus", env{"SLURM_JOB_NODELIST": "a", "SLURM_TASKS_PER_NODE": "2", "SLURM_JOB_CPUS_PER_NODE": "8"},
			[]Entry{named("a", 2)}, Slurm},
		{"slurm no counts", env{"SLURM_JOB_NODELIST": "a,b"}, []Entry{cores("a"), cores("b")}, Slurm},
		{"slurm before pbs", env{"SLURM_JOB_NODELIST": "a", "SLURM_TASKS_PER_NODE": "1", "PBS_NODEFILE": "/pbs/nodes"},
			[]Entry{named("a", 1)}, Slurm},
		{"pbs", env{"PBS_NODEFILE": "/pbs/nodes"}, []Entry{named("n1", 3), named("n2", 1)}, PBS},
		{"pbs ipv6 crlf", env{"PBS_NODEFILE": "/pbs/v6"}, []Entry{named("::1", 2)}, PBS},
		{"pbs before lsf", env{"PBS_NODEFILE": "/pbs/nodes", "LSB_MCPU_HOSTS": "x 1"}, []Entry{named("n1", 3), named("n2", 1)}, PBS},
		{"lsf", env{"LSB_MCPU_HOSTS": "host1 4 host2 2"}, []Entry{named("host1", 4), named("host2", 2)}, LSF},
		{"lsf repeat adds", env{"LSB_MCPU_HOSTS": " h 1  g 2 h 3 "}, []Entry{named("h", 4), named("g", 2)}, LSF},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, src, ok, err := Detect(tc.env.get, fsys.read)
			if err != nil {
				t.Fatal(err)
			}
			if ok != (tc.source != "") || src != tc.source || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %q, %v; want %+v, %q", got, src, ok, tc.want, tc.source)
			}
		})
	}

	errs := []struct {
		env  env
		want string
	}{
		{env{"SLURM_JOB_NODELIST": "n[1-"}, "SLURM_JOB_NODELIST=n[1-: n[1-: unclosed ["},
		{env{"SLURM_NODELIST": "n[2-1]"}, "SLURM_NODELIST=n[2-1]: n[2-1]: [2-1]: range runs backwards"},
		{env{"SLURM_JOB_NODELIST": "a", "SLURM_TASKS_PER_NODE": "2(x"}, "SLURM_TASKS_PER_NODE=2(x: 2(x: expected N or N(xM)"},
		{env{"SLURM_JOB_NODELIST": "a", "SLURM_JOB_CPUS_PER_NODE": "z"}, "SLURM_JOB_CPUS_PER_NODE=z: z: count not a number"},
		{env{"SLURM_JOB_NODELIST": "n[1-5]", "SLURM_TASKS_PER_NODE": "2(x3),1"}, "SLURM_TASKS_PER_NODE=2(x3),1: gives 4 nodes but SLURM_JOB_NODELIST names 5"},
		{env{"PBS_NODEFILE": "/pbs/missing"}, "PBS_NODEFILE=/pbs/missing: open /pbs/missing: file does not exist"},
		{env{"PBS_NODEFILE": "/pbs/empty"}, "PBS_NODEFILE /pbs/empty: no hosts"},
		{env{"PBS_NODEFILE": "/pbs/bad"}, `PBS_NODEFILE /pbs/bad:2: "n2 n3": not a host name or address`},
		{env{"SLURM_JOB_NODELIST": "a", "SLURM_HET_SIZE": "2"}, `SLURM_HET_SIZE=2: a Slurm heterogeneous job; prun does not support those (run it in one component)`},
		{env{"PBS_NODEFILE": "/pbs/badname"}, `PBS_NODEFILE /pbs/badname:3: n$: not a host name or address`},
		{env{"LSB_MCPU_HOSTS": "h1 4 h2"}, "LSB_MCPU_HOSTS=\"h1 4 h2\": h2: host without a slot count"},
		{env{"LSB_MCPU_HOSTS": "h1 x"}, "LSB_MCPU_HOSTS=\"h1 x\": h1 x: slot count not a number"},
		{env{"LSB_MCPU_HOSTS": "h1 0"}, "LSB_MCPU_HOSTS=\"h1 0\": h1 0: slot count must be at least 1"},
		{env{"LSB_MCPU_HOSTS": "h/1 2"}, "LSB_MCPU_HOSTS=\"h/1 2\": h/1: not a host name or address"},
		{env{"LSB_MCPU_HOSTS": "  "}, "LSB_MCPU_HOSTS=\"  \": no hosts"},
	}
	for _, tc := range errs {
		got, _, ok, err := Detect(tc.env.get, fsys.read)
		if err == nil || err.Error() != tc.want || ok || got != nil {
			t.Errorf("%v: got %v (ok %v), want %q", tc.env, err, ok, tc.want)
		}
	}
}

// nil functions are the process's own environment and files.
func TestDetectDefaults(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/nodes"
	if err := os.WriteFile(path, []byte("h1\nh1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"SLURM_JOB_NODELIST", "SLURM_NODELIST", "LSB_MCPU_HOSTS"} {
		t.Setenv(v, "")
	}
	t.Setenv("PBS_NODEFILE", path)
	got, src, ok, err := Detect(nil, nil)
	if err != nil || !ok || src != PBS || !reflect.DeepEqual(got, []Entry{named("h1", 2)}) {
		t.Fatalf("got %+v, %q, %v, %v", got, src, ok, err)
	}
}

// Detect reads only the file PBS_NODEFILE names, through readFile.
func TestDetectReadsThroughReadFile(t *testing.T) {
	var asked []string
	read := func(name string) ([]byte, error) {
		asked = append(asked, name)
		return nil, errors.New("permission\ndenied")
	}
	_, _, _, err := Detect(env{"PBS_NODEFILE": "/x"}.get, read)
	if err == nil || err.Error() != "PBS_NODEFILE=/x: permission denied" || !reflect.DeepEqual(asked, []string{"/x"}) {
		t.Fatalf("got %v, asked %q", err, asked)
	}
	if strings.ContainsRune(err.Error(), '\n') {
		t.Fatal("multi-line error")
	}
}

// DetectRM reads one resource manager's allocation, or none.
func TestDetectRM(t *testing.T) {
	all := env{"SLURM_JOB_NODELIST": "n[1-2]", "SLURM_TASKS_PER_NODE": "2(x2)", "LSB_MCPU_HOSTS": "l1 4"}
	for _, tc := range []struct {
		rm, src string
		ok      bool
		hosts   int
	}{{"", Slurm, true, 2}, {Slurm, Slurm, true, 2}, {LSF, LSF, true, 1}, {PBS, "", false, 0}, {User, "", false, 0}} {
		got, src, ok, err := DetectRM(tc.rm, all.get, nil)
		if err != nil || ok != tc.ok || src != tc.src || len(got) != tc.hosts {
			t.Errorf("DetectRM(%q) = %v, %q, %v, %v; want %d hosts from %q", tc.rm, got, src, ok, err, tc.hosts, tc.src)
		}
	}
}
