// Each context's app: its program resolved as mpirun resolves it, its environment, its files, its hosts.

package cli

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"prun/internal/progpath"
	"prun/jobspec"
)

// fileList splits flag's comma-separated list of files and resolves each
// against the working directory: the names as given, and absolute.
func fileList(flag, list string, env Env) (given, abs []string, err error) {
	for _, f := range strings.Split(list, ",") {
		if f == "" {
			return nil, nil, usagef("%s %s: an empty file name", flag, list)
		}
		path := f
		if !filepath.IsAbs(path) {
			cwd, err := env.Getwd()
			if err != nil {
				return nil, nil, usagef("cannot determine the working directory: %v", err)
			}
			path = filepath.Join(cwd, f)
		}
		given, abs = append(given, f), append(abs, path)
	}
	return given, abs, nil
}

// preloadFiles resolves --preload-files: regular files this process can
// read, with distinct base names (by which they land in working directories).
func preloadFiles(list string, env Env) ([]string, error) {
	given, paths, err := fileList("--preload-files", list, env)
	if err != nil {
		return nil, err
	}
	byName := map[string]string{}
	for i, abs := range paths {
		f := given[i]
		st, err := os.Stat(abs)
		if err != nil {
			return nil, usagef("--preload-files %s: %v", f, errText(err))
		}
		if !st.Mode().IsRegular() {
			return nil, usagef("--preload-files %s: not a regular file", f)
		}
		r, err := os.Open(abs)
		if err != nil {
			return nil, usagef("--preload-files %s: %v", f, errText(err))
		}
		r.Close()
		if other, dup := byName[filepath.Base(abs)]; dup {
			return nil, usagef("--preload-files: %s and %s would both be %s in the working directory", other, f, filepath.Base(abs))
		}
		byName[filepath.Base(abs)] = f
	}
	return paths, nil
}

// appsFromFile builds the applications of an application file; the command
// line's -x values (common) come before each line's own.
func appsFromFile(path string, common []string, env Env) ([]jobspec.App, error) {
	segs, err := readAppFile(path, env)
	if err != nil {
		return nil, err
	}
	var pre []string
	for _, x := range common {
		kv, err := exportVar(x, env)
		if err != nil {
			return nil, err
		}
		if kv != "" {
			pre = append(pre, kv)
		}
	}
	apps := make([]jobspec.App, 0, len(segs))
	for _, seg := range segs {
		var c contextOpts
		fs := newFlagSet(nil, &c)
		rest, err := parseFlags(fs, seg.args, "on the command line")
		if err == nil {
			err = checkRepeats(c.given, "")
		}
		if err == nil && len(rest) == 0 {
			err = usagef("no program")
		}
		var app jobspec.App
		if err == nil {
			c.npSet = npGiven(fs)
			app, err = buildApp(0, 1, rest, &c, env)
		}
		if err != nil {
			return nil, usagef("%s:%d: %v", path, seg.line, err)
		}
		app.Env = append(append([]string(nil), pre...), app.Env...)
		app.Hosts = strings.Join(c.hosts, ",")
		app.Hostfile = c.hostfile
		apps = append(apps, app)
	}
	return apps, nil
}

// perContextHosts applies mpirun's per-context --host and --hostfile: once
// a context after the first names hosts, each context's --host (the first's
// included) keeps its app on those hosts, and all of them together are the
// job's --host. A context's own hostfile keeps its app on that file's hosts
// (its --host selects among them) and joins the allocation (the launcher
// reads it); once a later context has one, the first context's --hostfile
// is that app's own too, and the job's is --default-hostfile's, if any.
// appHosts holds each context's --host (an --app file's lines set theirs).
func perContextHosts(job *jobspec.Job, appHosts []string, p *placeOpts, env Env) {
	if len(appHosts) == 0 {
		return // an --app file: each line's own hosts are already its app's
	}
	later := job.Apps[min(1, len(job.Apps)):]
	laterFile := slices.ContainsFunc(later, func(a jobspec.App) bool { return a.Hostfile != "" })
	if !laterFile && !slices.ContainsFunc(appHosts[min(1, len(appHosts)):], func(h string) bool { return h != "" }) {
		return
	}
	if first := cmp.Or(p.hostfile, p.hydraFile); laterFile && first != "" {
		job.Apps[0].Hostfile = first
		job.Place.Hostfile = p.fallbackHostfile(env)
	}
	appHosts[0] = strings.Join(job.Place.Hosts, ",")
	job.Place.Hosts = nil
	for i, h := range appHosts {
		job.Apps[i].Hosts = h
		if h != "" && job.Apps[i].Hostfile == "" {
			job.Place.Hosts = append(job.Place.Hosts, h)
		}
	}
}

// outputFiles reports whether --output forms name per-rank files.
func outputFiles(forms []string) bool {
	for _, f := range forms {
		for _, item := range strings.Split(f, ",") {
			if name, _, _ := strings.Cut(strings.TrimSpace(item), "="); name == "dir" || name == "file" {
				return true
			}
		}
	}
	return false
}

// contextWhere names application context i of n in messages, when there
// are several.
func contextWhere(i, n int) string {
	if n > 1 {
		return fmt.Sprintf(" in application context %d", i+1)
	}
	return ""
}

func buildApp(i, n int, rest []string, c *contextOpts, env Env) (jobspec.App, error) {
	where := contextWhere(i, n)
	if len(rest) == 0 {
		switch {
		case n == 1:
			return jobspec.App{}, usagef("no program given (usage: prun [options] -n N PROGRAM [ARGS] [: -n M PROGRAM2 ...])")
		case i == n-1:
			return jobspec.App{}, usagef("stray ':' at the end of the command line: no program follows it")
		default:
			return jobspec.App{}, usagef("no program%s (a stray ':'?)", where)
		}
	}
	if c.np < 0 {
		return jobspec.App{}, usagef("-n %d%s: the number of processes cannot be negative", c.np, where)
	}
	if c.np == 0 && c.npSet {
		return jobspec.App{}, usagef("-n 0%s: at least one process is needed", where)
	}
	if strings.ContainsAny(c.pset, ", \t\n") {
		return jobspec.App{}, usagef("--pset %q%s: a process set's name has no commas or spaces", c.pset, where)
	}
	app := jobspec.App{Argv: rest, NP: c.np, Wdir: c.wdir, EnvNone: c.envNone, Pset: c.pset}
	for _, x := range c.env {
		kv, err := exportVar(x, env)
		if err != nil {
			return app, err
		}
		if kv != "" {
			app.Env = append(app.Env, kv)
		}
	}
	cwd, err := env.Getwd()
	if err != nil {
		return app, usagef("cannot determine the working directory: %v", err)
	}
	if app.Wdir == "" {
		app.Wdir = cwd
	} else {
		if !filepath.IsAbs(app.Wdir) {
			app.Wdir = filepath.Join(cwd, app.Wdir)
		}
		if st, err := os.Stat(app.Wdir); err != nil || !st.IsDir() {
			return app, usagef("--wdir %s%s: not a directory", c.wdir, where)
		}
	}
	if c.path != "" {
		env.LookPath = lookPathIn(c.path, app.Wdir)
	}
	exe, err := resolveProgram(rest[0], app.Wdir, env)
	if err != nil {
		return app, err
	}
	app.Exe = exe
	return app, nil
}

func exportVar(x string, env Env) (string, error) {
	if x == "" {
		return "", usagef("-x needs a variable name")
	}
	name, val, ok := strings.Cut(x, "=")
	if !validEnvName(name) {
		return "", usagef("-x %s: %q is not a valid environment variable name", x, name)
	}
	if ok {
		return name + "=" + val, nil
	}
	v, set := env.LookupEnv(name)
	if !set {
		// as mpirun: a warning, and the job runs (CI scripts pass -x
		// LD_LIBRARY_PATH whether it is set or not)
		env.warnf("-x %s: not set in prun's environment, not exported", name)
		return "", nil
	}
	return name + "=" + v, nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r == '_' || (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') || (i > 0 && r >= '0' && r <= '9') {
			continue
		}
		return false
	}
	return true
}

// resolveProgram finds the program as the shell would (progpath.Resolve),
// a usage error when it cannot.
func resolveProgram(prog, wdir string, env Env) (string, error) {
	path, err := progpath.Resolve(prog, wdir, env.LookPath)
	if err != nil {
		return "", usagef("%v", err)
	}
	return path, nil
}

func parseTimeout(flag, env string) (time.Duration, error) {
	src, v := "--timeout", flag
	if v == "" {
		src, v = "MPIEXEC_TIMEOUT", env
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n <= 0 || n > 1e7 {
		if d, derr := time.ParseDuration(v); derr == nil && d > 0 {
			return d, nil
		}
		return 0, usagef("%s %s: want a positive number of seconds", src, v)
	}
	return time.Duration(n * float64(time.Second)), nil
}

// lookPathIn is exec.LookPath over the directories of --path instead of
// PATH (relative ones from the working directory of the ranks); its
// not-found error names them, for resolveProgram's message.
func lookPathIn(dirs, wdir string) func(string) (string, error) {
	return func(prog string) (string, error) {
		if p, ok := findIn(prog, dirs, wdir, ""); ok {
			return p, nil
		}
		return "", fmt.Errorf("not found in --path %s", dirs)
	}
}

// findIn is the first executable regular file prog in the directories of
// the list dirs, relative ones from base; an empty entry is empty (skipped
// when "", as --path does; "." as PATH's is).
func findIn(prog, dirs, base, empty string) (string, bool) {
	for _, d := range filepath.SplitList(dirs) {
		if d == "" {
			if d = empty; d == "" {
				continue
			}
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(base, d)
		}
		p := filepath.Join(d, prog)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

// remoteShell reads the remote shell that users of Open MPI and Hydra name
// outside the command line: Open MPI's plm_rsh_agent and plm_rsh_args (from
// --mca, else OMPI_MCA_*, else its parameter files), else Hydra's
// HYDRA_LAUNCHER_EXEC (or HYDRA_BOOTSTRAP_EXEC). Plain ssh is
// prun's built-in client; anything else becomes --rsh. It returns the
// -launcher word and the --rsh command.
func remoteShell(mca *mcaParams, env Env) (launcher, rsh string) {
	param := func(name string) string {
		v, _, _ := mca.get(name)
		return v
	}
	agent, args := param("plm_rsh_agent"), param("plm_rsh_args")
	if agent == "" {
		for _, name := range []string{"HYDRA_LAUNCHER_EXEC", "HYDRA_BOOTSTRAP_EXEC"} {
			if v, _ := env.LookupEnv(name); strings.TrimSpace(v) != "" {
				return "", strings.TrimSpace(v)
			}
		}
		if args == "" {
			return "", ""
		}
		agent = "ssh"
	}
	// Open MPI's agent is a list of alternatives, "ssh : rsh": the first
	// one found on PATH (ssh always: prun has its own).
	alts := strings.Split(agent, ":")
	pick := strings.TrimSpace(alts[0])
	for _, a := range alts {
		a = strings.TrimSpace(a)
		first, _, _ := strings.Cut(a, " ")
		if _, err := env.LookPath(first); a == "ssh" || first != "" && err == nil {
			pick = a
			break
		}
	}
	if pick == "ssh" && args == "" {
		return "ssh", ""
	}
	if args != "" {
		pick += " " + args
	}
	return "", pick
}
