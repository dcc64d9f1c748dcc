package cli

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestDebuggerCommand(t *testing.T) {
	env, dir := testEnv(t)
	look := env.LookPath
	env.LookPath = func(name string) (string, error) {
		if name == "ddt" || name == "gdb" {
			return "/opt/bin/" + name, nil
		}
		return look(name)
	}
	self, _ := os.Executable()

	// The first debugger of mpirun's list found: totalview is not, ddt is.
	req, err := Parse(strings.Fields("--debug -n 4 ./app a1 a2"), env)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(req.Exec, " "), "/opt/bin/ddt -n 4 -start "+dir+"/app a1 a2"; got != want {
		t.Errorf("--debug: %q, want %q", got, want)
	}
	// prun and all of its arguments, -tv included: the prun the debugger
	// starts finds PRUN_UNDER_DEBUGGER set and runs the job.
	argv := []string{"-tv", "--debugger", "nope -x : gdb -batch --args @mpirun@ @mpirun_args@", "-n", "2", "./app"}
	if req, err = Parse(argv, env); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(req.Exec, "|"), "/opt/bin/gdb|-batch|--args|"+self+"|"+strings.Join(argv, "|"); got != want {
		t.Errorf("-tv --debugger: %q, want %q", got, want)
	}
	vars := env.LookupEnv
	env.LookupEnv = func(k string) (string, bool) {
		if k == UnderDebugger {
			return "1", true
		}
		return vars(k)
	}
	if req, err := Parse(argv, env); err != nil || req.Exec != nil || req.Job == nil || req.Job.Apps[0].NP != 2 {
		t.Errorf("under the debugger: %+v, %v; want the job", req, err)
	}
	env.LookupEnv = vars

	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"--debug", "./app"}, "ddt needs the number of processes: give -n"},
		{[]string{"--debug", "-n", "1", "./app", ":", "-n", "1", "./app2"}, "ddt takes one application context, not 2"},
		{[]string{"--debug", "--debugger", "totalview : fxp", "-n", "1", "./app"}, "none of the debuggers was found in PATH: totalview, fxp (--debugger sets the list)"},
	} {
		_, err := Parse(c.argv, env)
		var ue *UsageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v; want a usage error saying %q", c.argv, err, c.want)
		}
	}
}
