package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"prun/jobspec"
)

// testEnv is a fixed environment: a working directory with two programs.
func testEnv(t testing.TB) (Env, string) {
	dir := t.TempDir()
	for _, name := range []string{"app", "app2"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"SET_VAR": "v1", "EMPTY_VAR": ""}
	return Env{
		LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
		Getwd:     func() (string, error) { return dir, nil },
		LookPath: func(name string) (string, error) {
			if name == "sh" {
				return "/bin/sh", nil
			}
			return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
		},
	}, dir
}

func TestParseMPMD(t *testing.T) {
	env, dir := testEnv(t)
	req, err := Parse(strings.Fields("--tag-output --timeout 7 -n 4 ./app a1 a2 : -np 2 -x SET_VAR -x B=2 --wdir "+dir+" ./app2 b1"), env)
	if err != nil {
		t.Fatal(err)
	}
	j := req.Job
	if len(j.Apps) != 2 || !j.TagOutput || j.Timeout != 7*time.Second {
		t.Fatalf("job = %+v", j)
	}
	a, b := j.Apps[0], j.Apps[1]
	if a.NP != 4 || a.Exe != filepath.Join(dir, "app") || strings.Join(a.Argv, " ") != "./app a1 a2" || a.Wdir != dir {
		t.Errorf("app 0 = %+v", a)
	}
	if b.NP != 2 || strings.Join(b.Argv, " ") != "./app2 b1" || strings.Join(b.Env, ",") != "SET_VAR=v1,B=2" {
		t.Errorf("app 1 = %+v", b)
	}
	if j.NumProcs() != 6 {
		t.Errorf("NumProcs = %d", j.NumProcs())
	}
}

func TestFlagsAfterProgramBelongToIt(t *testing.T) {
	env, _ := testEnv(t)
	req, err := Parse([]string{"-n", "1", "./app", "-n", "3", "--timeout", "x", "-np"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(req.Job.Apps[0].Argv, " "); got != "./app -n 3 --timeout x -np" {
		t.Errorf("argv = %q", got)
	}
	if req.Job.Apps[0].NP != 1 || req.Job.Timeout != 0 {
		t.Errorf("job = %+v", req.Job)
	}
}

func TestOmittedNP(t *testing.T) {
	env, _ := testEnv(t)
	req, err := Parse([]string{"sh", "-c", "true"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if req.Job.Apps[0].NP != 0 || req.Job.Apps[0].Exe != "/bin/sh" {
		t.Errorf("app = %+v", req.Job.Apps[0])
	}
}

func TestHelpVersion(t *testing.T) {
	env, _ := testEnv(t)
	for _, tc := range []struct {
		args          []string
		help, version bool
	}{
		{[]string{"-h"}, true, false},
		{[]string{"--help"}, true, false},
		{[]string{"--version"}, false, true},
		{[]string{"--allow-run-as-root", "--version"}, false, true},
	} {
		req, err := Parse(tc.args, env)
		if err != nil || req.Help != tc.help || req.Version != tc.version {
			t.Errorf("%v: req=%+v err=%v", tc.args, req, err)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	env, _ := testEnv(t)
	for _, tc := range []struct {
		args string
		want string
	}{
		{"", "no program given"},
		{"-n 2", "no program given"},
		{"-n 0 ./app", "-n 0: at least one process"},
		{"-n -1 ./app", "cannot be negative"},
		{"-n 2 ./nope", "./nope: no such file"},
		{"-n 2 ./data", "./data: not executable"},
		{"-n 2 ./", "is a directory"},
		{"-n 2 ./app :", "stray ':' at the end"},
		{": -n 2 ./app", "no program in application context 1"},
		{"-n 1 ./app : : -n 1 ./app", "no program in application context 2"},
		{"--tiemout 3 ./app", "did you mean --timeout"},
		{"--tag-ouput ./app", "did you mean --tag-output"},
		{"-n 1 ./app : --timeout 3 ./app", "--timeout is a global option"},
		{"-x 1BAD=3 ./app", "not a valid environment variable name"},
		{"--timeout abc ./app", "--timeout abc: want a positive number"},
		{"--pset a -n 1 ./app : --pset a -n 1 ./app", "--pset a in application contexts 1 and 2"},
		{"--pset a,b -n 1 ./app", "a process set's name has no commas or spaces"},
		{"--timeout -3 ./app", "want a positive number"},
		{"-n two ./app", `--np "two": want a whole number`},
		{"--launch-fanout 1x -n 1 ./app", `--launch-fanout "1x": want a whole number`},
		{"--tag-output=x -n 1 ./app", `--tag-output=x: want true or false`},
		{"--max-restarts -1 -n 1 ./app", `--max-restarts -1: want 0 or more`},
		{"--disable-recovery=maybe -n 1 ./app", `--disable-recovery=maybe: want true or false`},
		{"nosuchcmd", "nosuchcmd: command not found"},
		{"--wdir /nonexistent/dir ./app", "not a directory"},
		{"--launch-fanout 0 ./app", "--launch-fanout 0: want 1 or more"},
		{"--launch-fanout -2 ./app", "--launch-fanout -2: want 1 or more"},
		{"--prefix opt/prun ./app", "--prefix opt/prun: want an absolute directory"},
		{"--mca btl", "--mca needs a KEY and a VALUE"},
		{"--mca btl ./app", "no program given"}, // ./app is the VALUE, as with mpirun
		{"--mca=btl self ./app", "--mca needs a KEY and a VALUE"},
		{"--mca btl -n 1 ./app", "--mca btl: no VALUE before -n"},
		{"--mca btl.x self ./app", `"btl.x" is not a parameter name`},
		{"-n 1 ./app : --mca btl self ./app", "--mca is a global option"},
		{"--preload-files nope.dat ./app", "--preload-files nope.dat: no such file"},
		{"-pmi-port --pmi pmix ./app", "-pmi-port serves PMI-1 and PMI-2 clients: not with --pmi pmix"},
		{"-pmi-port --pmi none ./app", "not with --pmi none"},
		{"-rmk sge ./app", "-rmk sge: prun reads Slurm, PBS and LSF allocations"},
		{"-order-nodes up ./app", "-order-nodes up: want ASCENDING or DESCENDING"},
		{"--preload-files . ./app", "--preload-files .: not a regular file"},
		{"--preload-files data,,app ./app", "an empty file name"},
		{"--preload-files data,./data ./app", "would both be data in the working directory"},
	} {
		_, err := Parse(strings.Fields(tc.args), env)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want a usage error containing %q", tc.args, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("Parse(%q): error is not one line: %q", tc.args, err)
		}
	}
}

func TestTimeoutFromEnvironment(t *testing.T) {
	env, _ := testEnv(t)
	env.LookupEnv = func(k string) (string, bool) {
		if k == "MPIEXEC_TIMEOUT" {
			return "2.5", true
		}
		return "", false
	}
	req, err := Parse([]string{"./app"}, env)
	if err != nil || req.Job.Timeout != 2500*time.Millisecond {
		t.Fatalf("timeout = %v, %v", req, err)
	}
	req, err = Parse([]string{"--timeout", "1", "./app"}, env)
	if err != nil || req.Job.Timeout != time.Second {
		t.Fatalf("flag must win over MPIEXEC_TIMEOUT: %v, %v", req, err)
	}
}

func TestSingleDashLongOptions(t *testing.T) {
	env, dir := testEnv(t)
	req, err := Parse([]string{"-np", "3", "-wdir", dir, "-tag-output", "./app"}, env)
	if err != nil {
		t.Fatal(err)
	}
	if req.Job.Apps[0].NP != 3 || !req.Job.TagOutput {
		t.Errorf("job = %+v", req.Job)
	}
	req, err = Parse([]string{"-np=2", "./app"}, env)
	if err != nil || req.Job.Apps[0].NP != 2 {
		t.Errorf("-np=2: %v %v", req, err)
	}
}

// mpirun's --mca KEY VALUE (also -mca, --gmca) and PRRTE's --pmixmca set
// the ranks' OMPI_MCA_ and PMIX_MCA_ variables, before each context's -x.
func TestMCA(t *testing.T) {
	env, _ := testEnv(t)
	req, err := Parse(strings.Fields("--mca btl self,vader -mca pml ^cm --gmca a_b -1 --pmixmca ptl_base_if_include lo "+
		"-n 2 ./app --mca x y : -x OMPI_MCA_pml=ob1 -c 3 ./app2"), env)
	if err != nil {
		t.Fatal(err)
	}
	a, b := req.Job.Apps[0], req.Job.Apps[1]
	mca := "OMPI_MCA_btl=self,vader OMPI_MCA_pml=^cm OMPI_MCA_a_b=-1 PMIX_MCA_ptl_base_if_include=lo"
	if got := strings.Join(a.Env, " "); got != mca {
		t.Errorf("app 0 env = %q, want %q", got, mca)
	}
	if got := strings.Join(b.Env, " "); got != mca+" OMPI_MCA_pml=ob1" {
		t.Errorf("app 1 env = %q", got)
	}
	if strings.Join(a.Argv, " ") != "./app --mca x y" || b.NP != 3 {
		t.Errorf("apps = %+v, %+v", a, b)
	}
	req, err = Parse(strings.Fields("-H a:2,b -n 1 ./app"), env)
	if err != nil || strings.Join(req.Job.Place.Hosts, " ") != "a:2,b" {
		t.Errorf("-H: %+v %v", req, err)
	}
}

// Hydra's spellings: -genv/-env VAR VALUE, -genvall, -ppn, -f, -hosts, -iface, -prepend-rank.
func TestHydraFlags(t *testing.T) {
	env, dir := testEnv(t)
	hosts := filepath.Join(dir, "hosts")
	req, err := Parse(strings.Fields("-genvall -genv G 1 -ppn 2 -f "+hosts+" -hosts a,b -hosts c -iface eth1 -prepend-rank -n 1 -env E x -x G=2 ./app : -env E y ./app2"), env)
	if err != nil {
		t.Fatal(err)
	}
	j := req.Job
	if got := strings.Join(j.Apps[0].Env, " "); got != "G=1 E=x G=2" {
		t.Errorf("app 0 env = %q", got)
	}
	if got := strings.Join(j.Apps[1].Env, " "); got != "G=1 E=y" {
		t.Errorf("app 1 env = %q", got)
	}
	if j.Launch.IfInclude != "eth1" || j.Output != (jobspec.Output{Rank: true}) {
		t.Errorf("launch %+v, output %+v", j.Launch, j.Output)
	}
	if j.Place.Hostfile != hosts || strings.Join(j.Place.Hosts, " ") != "a,b c" ||
		!slices.Equal(req.place.Compat, [][2]string{{"ppn", "2"}, {"hydra-hosts", ""}}) {
		t.Errorf("placement = %+v", j.Place)
	}
	// -genvlist and -envlist export variables by name; -launcher and
	// -launcher-exec choose how daemons start.
	req, err = Parse(strings.Fields("-genvlist SET_VAR -launcher rsh -n 1 -envlist EMPTY_VAR ./app : -n 1 ./app2"), env)
	if err != nil {
		t.Fatal(err)
	}
	j = req.Job
	if a0, a1 := strings.Join(j.Apps[0].Env, " "), strings.Join(j.Apps[1].Env, " "); a0 != "SET_VAR=v1 EMPTY_VAR=" || a1 != "SET_VAR=v1" {
		t.Errorf("env = %q, %q", a0, a1)
	}
	if j.Launch.Rsh != "rsh" {
		t.Errorf("-launcher rsh: rsh %q", j.Launch.Rsh)
	}
	for args, want := range map[string]string{"-launcher slurm ./app": "slurm", "-bootstrap slurm ./app": "slurm",
		"--launcher auto ./app": "", "./app": "", "--launcher ssh ./app": "ssh", "-launcher rsh ./app": "ssh"} {
		if req, err := Parse(strings.Fields(args), env); err != nil || req.Job.Launch.Agent != want {
			t.Errorf("%s: agent %q, want %q (%v)", args, req.Job.Launch.Agent, want, err)
		}
	}
	if req, err = Parse(strings.Fields("-bootstrap ssh -bootstrap-exec myssh -n 1 ./app"), env); err != nil || req.Job.Launch.Rsh != "myssh" {
		t.Errorf("-bootstrap-exec myssh: %v %+v", err, req)
	}
	for args, want := range map[string]string{
		"-genv 1X y ./app":             `"1X" is not a valid environment variable name`,
		"-n 1 -env X":                  "--env needs a KEY and a VALUE",
		"-envlist A,,B ./app":          `--envlist "A,,B": "" is not a valid environment variable name`,
		"-launcher pbs ./app":          "-launcher pbs: prun starts daemons with ssh, rsh, --rsh CMD or slurm",
		"-launcher slurm -rsh x ./app": "-launcher slurm and --rsh x: give one",
		"-launchr ssh ./app":           "unknown flag -launchr",
		"-lh ./app":                    "unknown flag -lh",
		"-rsh=x -launch ./app":         "unknown flag -launch (did you mean --launch-agent?)",
	} {
		if _, err := Parse(strings.Fields(args), env); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", args, err, want)
		}
	}
}

// FuzzParse: no input may panic, and every failure is a one-line usage error.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"-n 4 ./app a : -n 2 ./app2 b", "-np 2 -x A=1 ./app", ":", "-n", "--timeout 3 -- ./app",
		"-x", "-n 1 ./app : : ./app", "--wdir . ./app", "-tag-output -np=3 ./app -n 2", "-h", "--version",
		"--mca btl self -n 2 ./app", "-mca a b --pmixmca c d ./app",
		"-launcher ssh -genvlist SET_VAR,B -envlist C ./app", "-lx ./app", "--cpu-set 0-1 ./app",
		"-q --report-pid - -n 1 --path bin:/x ./app", "-genvnone -n 1 -envnone ./app", "-nameserver h ./app",
		"--mca plm_rsh_agent rsh:ssh --mca plm_rsh_args -C ./app",
		"--ppr 2:core -v -prepend-pattern %r%% ./app", "-genvnone ./a : -envall ./b", "-info", "--cpu-list 0 ./app",
		"-outfile-pattern o.%r%% -errfile-pattern e.%h ./app",
		"-s --preload-files data,app --output-proctable ./app", "--output-proctable=+ --preload-files=nope ./app",
		"-tune nope -am x.conf --show-progress ./app", "-pmi-port --pmi pmi1 ./app", "-pmi-port --pmi pmi2 ./app", "-rmk user -order-nodes ascending --enable-recovery ./app", "-membind bind:0 -n 2 ./app",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		env, _ := testEnv(t)
		args := strings.Split(s, " ")
		req, err := Parse(args, env)
		if err != nil {
			var ue *UsageError
			if !errors.As(err, &ue) {
				t.Fatalf("Parse(%q): error %T is not a UsageError: %v", s, err, err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("Parse(%q): multi-line error %q", s, err)
			}
			return
		}
		if req.Job == nil {
			if !req.Help && !req.Version {
				t.Fatalf("Parse(%q): no job, no help, no version", s)
			}
			return
		}
		for _, a := range req.Job.Apps {
			if a.NP < 0 || len(a.Argv) == 0 || !filepath.IsAbs(a.Exe) {
				t.Fatalf("Parse(%q): bad app %+v", s, a)
			}
		}
	})
}

// mpirun's older placement spellings reach the mapper in mpirun's order.
func TestCompatFlags(t *testing.T) {
	env, _ := testEnv(t)
	req, err := Parse(strings.Fields("--display-map --display-allocation --bind-to-none --use-hwthread-cpus --cpus-per-rank 2 "+
		"--npersocket 1 --nooversubscribe -n 1 ./app"), env)
	if err != nil {
		t.Fatal(err)
	}
	pl := req.place
	want := [][2]string{{"nooversubscribe", ""}, {"npersocket", "1"}, {"use-hwthread-cpus", ""}, {"cpus-per-rank", "2"}, {"bind-to-none", ""}}
	if fmt.Sprint(pl.Compat) != fmt.Sprint(want) || fmt.Sprint(pl.Display) != "[map allocation]" {
		t.Errorf("compat %v (want %v), display %v", pl.Compat, want, pl.Display)
	}
	// ... and the job spec has them applied, as parsed policies.
	if got := req.Job.Place; got.MapBy.String() != "ppr:1:package:PE=2:NOOVERSUBSCRIBE:HWTCPUS" || got.BindTo.String() != "none" {
		t.Errorf("policies: map-by %s, bind-to %s", got.MapBy, got.BindTo)
	}
	// Contradicting spellings are the CLI's usage errors.
	if _, err := Parse(strings.Fields("--npersocket 1 --bysocket -n 1 ./app"), env); err == nil ||
		err.Error() != "--bysocket conflicts with --npersocket 1" {
		t.Errorf("--npersocket 1 --bysocket: %v", err)
	}
	if _, err := Parse(strings.Fields("--cpus-per-rank -1 -n 1 ./app"), env); err == nil ||
		!strings.Contains(err.Error(), "--cpus-per-rank -1: want a positive number") {
		t.Errorf("--cpus-per-rank -1: %v", err)
	}
	// Open MPI 4's --cpu-set is PRRTE's pe-list mapping.
	if req, err := Parse(strings.Fields("--cpu-set 0,2-3 -n 1 ./app"), env); err != nil {
		t.Errorf("--cpu-set 0,2-3: %v", err)
	} else if req.place.MapBy != "pe-list=0,2-3" {
		t.Errorf("--cpu-set 0,2-3: map-by %q", req.place.MapBy)
	}
	if _, err := Parse(strings.Fields("--cpu-set 0 --map-by core -n 1 ./app"), env); err == nil ||
		err.Error() != "--cpu-set cannot be combined with --map-by core (give --map-by pe-list=LIST:...)" {
		t.Errorf("--cpu-set with --map-by: %v", err)
	}
}

// TestMpirunExtras: -q, --report-pid, --path and Hydra's -envnone/-genvnone.
func TestMpirunExtras(t *testing.T) {
	env, dir := testEnv(t)
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	req, err := Parse(strings.Fields("-q --report-pid + -n 1 --path /nonexistent:bin tool : -envnone -x A=1 ./app"), env)
	if err != nil {
		t.Fatal(err)
	}
	j := req.Job
	if !j.Quiet || j.ReportPID != "+" {
		t.Errorf("quiet %v, report-pid %q", j.Quiet, j.ReportPID)
	}
	if j.Apps[0].Exe != filepath.Join(bin, "tool") || j.Apps[0].EnvNone {
		t.Errorf("app 0 = %+v", j.Apps[0])
	}
	if !j.Apps[1].EnvNone || strings.Join(j.Apps[1].Env, " ") != "A=1" {
		t.Errorf("app 1 = %+v", j.Apps[1])
	}
	req, err = Parse(strings.Fields("-genvnone -n 1 ./app : -n 1 ./app2"), env)
	if err != nil || !req.Job.Apps[0].EnvNone || !req.Job.Apps[1].EnvNone {
		t.Errorf("-genvnone: %v %+v", err, req)
	}
	for args, want := range map[string]string{
		"--path bin sh":            "sh: not found in --path bin",
		"-nsomething x -n 1 ./app": "unknown flag -nsomething",
		"-cx ./app":                "unknown flag -cx",
	} {
		if _, err := Parse(strings.Fields(args), env); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", args, err, want)
		}
	}
	if req, err := Parse(strings.Fields("-nameserver localhost -n 1 ./app"), env); err != nil || req.Job.NameServer != "localhost:6392" {
		t.Errorf("-nameserver localhost: %v %+v", err, req)
	}
	if req, err := Parse(strings.Fields("-n4 ./app"), env); err != nil || req.Job.Apps[0].NP != 4 {
		t.Errorf("-n4: %v %+v", err, req)
	}
}

// mustParse parses args in env, or fails the test.
func mustParse(t *testing.T, env Env, args string) *Request {
	t.Helper()
	req, err := Parse(strings.Fields(args), env)
	if err != nil {
		t.Fatalf("Parse(%q): %v", args, err)
	}
	return req
}

// moreSpellingErrors: TestMoreSpellings's command lines that are wrong,
// each with what its message must say.
var moreSpellingErrors = map[string]string{
	"-prepend-pattern %x -n 1 ./app":                            `unknown specifier %x`,
	"-prepend-pattern a% -n 1 ./app":                            `a lone % at the end`,
	"-n 1 -envall -envnone ./app : -n 1 ./app":                  "-envall and -envnone in application context 1: give one",
	"--set-cwd-to-session-dir -n 1 ./app : --wdir . -n 1 ./app": "--set-cwd-to-session-dir and --wdir in application context 2: give one",
	"-usize infinite -n 1 ./app":                                "-usize infinite: want a number of processes, SYSTEM or INFINITE",
	"-usize 0 -n 1 ./app":                                       "-usize 0: want a number of processes, SYSTEM or INFINITE",
	"-outfile-pattern o.%q -n 1 ./app":                          `-outfile-pattern "o.%q": unknown specifier %q`,
	"-errfile-pattern e --output dir=d -n 1 ./app":              "-errfile-pattern and --output-filename or --output dir=/file=: give one",
}

// TestMoreSpellings: the rest of mpirun's and Hydra's flags that users
// type, each with what it must turn into.
func TestMoreSpellings(t *testing.T) {
	env, _ := testEnv(t)
	parseReq := func(args string) *Request { t.Helper(); return mustParse(t, env, args) }
	parse := func(args string) *jobspec.Job { t.Helper(); return mustParse(t, env, args).Job }
	if req := parseReq("--ppr 2:package -n 4 ./app"); fmt.Sprint(req.place.Compat) != "[[ppr 2:package]]" {
		t.Errorf("--ppr: compat %v", req.place.Compat)
	}
	if req := parseReq("--cpu-list 0,1 -n 2 ./app"); req.place.MapBy != "pe-list=0,1" {
		t.Errorf("--cpu-list: map-by %q", req.place.MapBy)
	}
	if j := parse("--display-devel-map --display-devel-allocation --display-topo -n 1 ./app"); fmt.Sprint(j.Place.Display) != "[map allocation topo]" {
		t.Errorf("--display-devel-*: display %v", j.Place.Display)
	}
	if req := parseReq("-skip-launch-node -n 1 ./app"); fmt.Sprint(req.place.Compat) != "[[nolocal ]]" {
		t.Errorf("-skip-launch-node: compat %v", req.place.Compat)
	}
	if j := parse("-v -n 1 ./app"); !j.Verbose {
		t.Error("-v: not verbose")
	}
	if j := parse("-profile -n 1 ./app"); !j.Profile || j.Verbose {
		t.Error("-profile: not set, or verbose")
	}
	if j := parse("-verbose -n 1 ./app"); !j.Verbose {
		t.Error("-verbose: not verbose")
	}
	if j := parse("-prepend-pattern [%r@%h]%% -n 1 ./app"); j.OutputPrefix != "[%r@%h]%%" {
		t.Errorf("-prepend-pattern: %q", j.OutputPrefix)
	}
	if j := parse("--index-argv-by-rank --set-cwd-to-session-dir --debug-daemons -n 1 ./app"); !j.IndexArgv || !j.CwdSessionDir || !j.DebugDaemons {
		t.Errorf("--index-argv-by-rank --set-cwd-to-session-dir --debug-daemons: %v %v %v", j.IndexArgv, j.CwdSessionDir, j.DebugDaemons)
	}
	if j := parse("-s --preload-files data,app -n 1 ./app"); !j.PreloadBinary || len(j.PreloadFiles) != 2 ||
		filepath.Base(j.PreloadFiles[0]) != "data" || !filepath.IsAbs(j.PreloadFiles[1]) {
		t.Errorf("-s --preload-files: binary %v, files %q", j.PreloadBinary, j.PreloadFiles)
	}
	if req := parseReq("-membind interleave:0-1 -n 1 ./app"); req.place.MemBind != "interleave:0-1" || req.Job.Place.MemBind.String() != "interleave:0-1" {
		t.Errorf("-membind: %q", req.place.MemBind)
	}
	if j := parse("-rmk SLURM -order-nodes DESCENDING -n 1 ./app"); j.Place.RM != "slurm" || j.Place.OrderNodes != "descending" {
		t.Errorf("-rmk -order-nodes: %q %q", j.Place.RM, j.Place.OrderNodes)
	}
	if j := parse("-pmi-port -n 1 ./app"); !j.PMIPort {
		t.Error("-pmi-port: not set")
	}
	if j := parse("--max-restarts 3 -n 1 ./app"); j.MaxRestarts != 3 {
		t.Errorf("--max-restarts 3: %d", j.MaxRestarts)
	}
	if j := parse("--disable-recovery --enable-recovery -n 1 ./app"); !j.EnableRecovery {
		t.Error("--disable-recovery --enable-recovery: not set")
	}
	if j := parse("--enable-recovery -disable-recovery -n 1 ./app"); j.EnableRecovery {
		t.Error("--enable-recovery -disable-recovery: set")
	}
	if j := parse("--enable-recovery -n 1 ./app"); !j.EnableRecovery {
		t.Error("--enable-recovery: not set")
	}
	if j := parse("--show-progress -n 1 ./app"); !j.ShowProgress {
		t.Error("--show-progress: not set")
	}
	if j := parse("--output-proctable -n 1 ./app"); j.OutputProctable != "-" {
		t.Errorf("--output-proctable alone: %q, want -", j.OutputProctable)
	}
	if j := parse("--output-proctable=+ -n 1 ./app"); j.OutputProctable != "+" {
		t.Errorf("--output-proctable=+: %q", j.OutputProctable)
	}
	if j := parse("--pset left -n 1 ./app : -n 1 ./app"); j.Apps[0].Pset != "left" || j.Apps[1].Pset != "" {
		t.Errorf("--pset: %q %q", j.Apps[0].Pset, j.Apps[1].Pset)
	}
	if j := parse("--report-uri + -n 1 ./app"); j.ReportURI != "+" {
		t.Errorf("--report-uri: %q", j.ReportURI)
	}
	if j := parse("-localhost front -n 1 ./app"); j.Place.LocalHost != "front" {
		t.Errorf("-localhost: %q", j.Place.LocalHost)
	}
	if j := parse("-usize 64 -n 1 ./app"); j.UnivSize != 64 {
		t.Errorf("-usize 64: %d", j.UnivSize)
	}
	if j := parse("-usize INFINITE -n 1 ./app"); j.UnivSize != jobspec.UnivInfinite {
		t.Errorf("-usize INFINITE: %d", j.UnivSize)
	}
	if j := parse("-usize SYSTEM -n 1 ./app"); j.UnivSize != 0 {
		t.Errorf("-usize SYSTEM: %d", j.UnivSize)
	}
	if j := parse("-outfile-pattern o.%r -errfile-pattern e.%h -n 1 ./app"); j.OutfilePattern != "o.%r" || j.ErrfilePattern != "e.%h" {
		t.Errorf("file patterns: %q %q", j.OutfilePattern, j.ErrfilePattern)
	}
	j := parse("-genvnone -n 1 ./app : -envall -n 1 ./app")
	if !j.Apps[0].EnvNone || j.Apps[1].EnvNone {
		t.Errorf("-genvnone with -envall in context 2: EnvNone %v %v", j.Apps[0].EnvNone, j.Apps[1].EnvNone)
	}
	parse("--noprefix --novm --use-regexp --do-not-resolve -demux poll -topolib hwloc -n 1 ./app")
	if req, err := Parse([]string{"-info"}, env); err != nil || !req.Version {
		t.Errorf("-info: %v %+v", err, req)
	}
	for args, want := range moreSpellingErrors {
		if _, err := Parse(strings.Fields(args), env); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", args, err, want)
		}
	}
}

// TestRemoteShellFromEnvironment: Open MPI's plm_rsh_agent/plm_rsh_args and
// Hydra's HYDRA_LAUNCHER_EXEC and HYDRA_HOST_FILE choose what the command
// line does not.
func TestRemoteShellFromEnvironment(t *testing.T) {
	envWith := func(vars map[string]string) Env {
		e, _ := testEnv(t)
		e.LookupEnv = func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
		e.LookPath = func(name string) (string, error) {
			if name == "rsh" || name == "/opt/ssh" {
				return "/usr/bin/" + name, nil
			}
			return "", exec.ErrNotFound
		}
		return e
	}
	cases := []struct {
		args string
		vars map[string]string
		rsh  string
	}{
		{"-n 1 ./app", nil, ""},
		{"--mca plm_rsh_agent ssh -n 1 ./app", nil, ""},
		{"--mca plm_rsh_agent ssh:rsh -n 1 ./app", nil, ""},
		{"--mca plm_rsh_agent nossh:rsh -n 1 ./app", nil, "rsh"},
		{"--mca plm_rsh_agent /opt/ssh -mca plm_rsh_args -C -n 1 ./app", nil, "/opt/ssh -C"},
		{"--mca plm_rsh_args -p2222 -n 1 ./app", nil, "ssh -p2222"},
		{"-n 1 ./app", map[string]string{"OMPI_MCA_plm_rsh_agent": "rsh"}, "rsh"},
		{"--mca plm_rsh_agent ssh -n 1 ./app", map[string]string{"OMPI_MCA_plm_rsh_agent": "rsh"}, ""},
		{"-n 1 ./app", map[string]string{"HYDRA_LAUNCHER_EXEC": "myssh -q"}, "myssh -q"},
		{"--rsh mine -n 1 ./app", map[string]string{"OMPI_MCA_plm_rsh_agent": "rsh"}, "mine"},
		{"-launcher ssh -n 1 ./app", map[string]string{"HYDRA_LAUNCHER_EXEC": "myssh"}, ""},
	}
	for _, c := range cases {
		req, err := Parse(strings.Fields(c.args), envWith(c.vars))
		if err != nil {
			t.Errorf("Parse(%q) with %v: %v", c.args, c.vars, err)
			continue
		}
		if req.Job.Launch.Rsh != c.rsh {
			t.Errorf("Parse(%q) with %v: rsh %q, want %q", c.args, c.vars, req.Job.Launch.Rsh, c.rsh)
		}
	}
	req, err := Parse(strings.Fields("-n 1 ./app"), envWith(map[string]string{"HYDRA_HOST_FILE": "/h"}))
	if err != nil || req.Job.Place.Hostfile != "/h" {
		t.Errorf("HYDRA_HOST_FILE: %v %+v", err, req)
	}
}

// mpirun's per-context --host: a later context's -H makes each context's
// hosts its app's own, and all of them the job's --host; a first context's
// -H alone stays the job's, for every app.
func TestPerContextHosts(t *testing.T) {
	env, _ := testEnv(t)
	for _, tc := range []struct {
		args, place string
		apps        []string
	}{
		{"-H a:1 -n 1 ./app : -n 2 -H b:2 ./app2", "a:1|b:2", []string{"a:1", "b:2"}},
		{"-n 1 ./app : -n 2 --host b,c ./app2 : -n 1 -H d -H e ./app", "b,c|d,e", []string{"", "b,c", "d,e"}},
		{"-H a -n 1 ./app : -n 1 ./app2", "a", []string{"", ""}},
		{"--hostfile hf -H a -n 1 ./app : -n 1 -hosts b ./app2", "a|b", []string{"a", "b"}},
	} {
		req, err := Parse(strings.Fields(tc.args), env)
		if err != nil {
			t.Errorf("%s: %v", tc.args, err)
			continue
		}
		var apps []string
		for _, a := range req.Job.Apps {
			apps = append(apps, a.Hosts)
		}
		if got := strings.Join(req.Job.Place.Hosts, "|"); got != tc.place || !slices.Equal(apps, tc.apps) {
			t.Errorf("%s: job hosts %q, apps %q; want %q, %q", tc.args, got, apps, tc.place, tc.apps)
		}
	}
}

// Hydra's host lists (-hosts, -f, HYDRA_HOST_FILE) are placed as Hydra
// places them; mpirun's (--host, -H, --hostfile, -machinefile) are not.
func TestHydraHostLists(t *testing.T) {
	env, _ := testEnv(t)
	hydraEnv := withVars(t, map[string]string{"HYDRA_HOST_FILE": "/hf"})
	for _, tc := range []struct {
		args  string
		env   Env
		hydra bool
	}{
		{"-hosts a,b -n 4 ./app", env, true},
		{"-f /hf -n 4 ./app", env, true},
		{"-n 4 ./app", hydraEnv, true},
		{"-H a,b -n 4 ./app", hydraEnv, false},
		{"--host a,b -n 4 ./app", env, false},
		{"--hostfile /hf -n 4 ./app", env, false},
		{"-machinefile /hf -n 4 ./app", env, false},
		{"-n 4 ./app", env, false},
	} {
		req, err := Parse(strings.Fields(tc.args), tc.env)
		if err != nil {
			t.Errorf("%s: %v", tc.args, err)
			continue
		}
		got := slices.Contains(req.place.Compat, [2]string{"hydra-hosts", ""})
		if got != tc.hydra || req.Job.Place.Hostfile == "" && strings.Contains(tc.args, "/hf") {
			t.Errorf("%s: hydra placement %v, hostfile %q", tc.args, got, req.Job.Place.Hostfile)
		}
	}
}

// A variable -x (or -genvlist, or a tune file) names that prun's
// environment lacks is a warning, as under mpirun, and the job runs.
func TestUnsetExportWarns(t *testing.T) {
	env, dir := testEnv(t)
	tune := filepath.Join(dir, "t.tune")
	if err := os.WriteFile(tune, []byte("-x NOT_IN_TUNE -x T=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	req, err := Parse(strings.Fields("-tune "+tune+" -genvlist SET_VAR,NOPE -x NOT_SET -x SET_VAR ./app"), env)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-x NOT_SET: not set in prun's environment, not exported",
		"-x NOT_IN_TUNE: not set in prun's environment, not exported",
		"-genvlist: NOPE is not set in prun's environment, not exported"}
	if !slices.Equal(req.Warnings, want) {
		t.Errorf("warnings %q, want %q", req.Warnings, want)
	}
	if got := strings.Join(req.Job.Apps[0].Env, " "); !strings.HasSuffix(got, " T=1 SET_VAR=v1 SET_VAR=v1") {
		t.Errorf("env %q", got)
	}
}

// mpirun's per-context --hostfile: a later context's file is its app's
// own; the first context's --hostfile then is app 0's, and the job's
// hostfile is --default-hostfile's; a context's -H selects within its own
// file and does not narrow the job's hosts.
func TestPerContextHostfiles(t *testing.T) {
	env, _ := testEnv(t)
	for _, tc := range []struct {
		args, hostfile, place string
		files, apps           []string
	}{
		{"-n 1 ./app : --hostfile h2 -n 2 ./app2", "", "", []string{"", "h2"}, []string{"", ""}},
		{"--hostfile h1 -n 1 ./app : -f h2 -n 2 ./app2", "", "", []string{"h1", "h2"}, []string{"", ""}},
		{"-f h1 -n 1 ./app : -f h2 -n 2 ./app2", "", "", []string{"h1", "h2"}, []string{"", ""}}, // Hydra's -f first
		{"--default-hostfile d --hostfile h1 -n 1 ./app : --machinefile h2 -n 2 ./app2", "d", "", []string{"h1", "h2"}, []string{"", ""}},
		{"-H a -n 1 ./app : --hostfile h2 -H b -n 2 ./app2 : -H c ./app", "", "a|c", []string{"", "h2", ""}, []string{"a", "b", "c"}},
		{"--hostfile h1 -n 1 ./app : -H b -n 2 ./app2", "h1", "b", []string{"", ""}, []string{"", "b"}},
	} {
		req, err := Parse(strings.Fields(tc.args), env)
		if err != nil {
			t.Errorf("%s: %v", tc.args, err)
			continue
		}
		var files, apps []string
		for _, a := range req.Job.Apps {
			files, apps = append(files, a.Hostfile), append(apps, a.Hosts)
		}
		pl := req.Job.Place
		if got := strings.Join(pl.Hosts, "|"); pl.Hostfile != tc.hostfile || got != tc.place || !slices.Equal(files, tc.files) || !slices.Equal(apps, tc.apps) {
			t.Errorf("%s: hostfile %q, job hosts %q, app files %q, app hosts %q; want %q, %q, %q, %q",
				tc.args, pl.Hostfile, got, files, apps, tc.hostfile, tc.place, tc.files, tc.apps)
		}
	}
	dir := t.TempDir()
	app := filepath.Join(dir, "app")
	if err := os.WriteFile(app, []byte("-n 1 ./app\n--hostfile h2 -H b -n 1 ./app\n-H c -n 1 ./app\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	req, err := Parse([]string{"--app", app}, env)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(req.Job.Place.Hosts, "|"); got != "c" || req.Job.Apps[1].Hostfile != "h2" || req.Job.Apps[1].Hosts != "b" {
		t.Errorf("--app: job hosts %q, app 2 %+v", got, req.Job.Apps[1])
	}
}

// mpirun 4.1's remaining spellings: --n, -debug-devel/-debug-daemons-file,
// and the dead --cartofile and -enable-instant-on-support.
func TestMpirunLeftovers(t *testing.T) {
	env, _ := testEnv(t)
	req, err := Parse(strings.Fields("--n 3 -debug-devel --cartofile x -enable-instant-on-support ./app"), env)
	if err != nil {
		t.Fatal(err)
	}
	if req.Job.Apps[0].NP != 3 || !req.Job.DebugDaemons {
		t.Errorf("np %d, debug daemons %v", req.Job.Apps[0].NP, req.Job.DebugDaemons)
	}
	if _, err := Parse(strings.Fields("--n 0 ./app"), env); err == nil {
		t.Error("--n 0 accepted")
	}
	if req, err := Parse(strings.Fields("-max-vm-size 2 ./app"), env); err != nil || req.Job.Place.MaxNodes != 2 {
		t.Errorf("-max-vm-size 2: %v", err)
	}
	if _, err := Parse(strings.Fields("-max-vm-size -1 ./app"), env); err == nil || !strings.Contains(err.Error(), "want a number of hosts") {
		t.Errorf("-max-vm-size -1: %v", err)
	}
}
