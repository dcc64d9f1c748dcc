// Package cli turns a prun command line into a jobspec.Job. It owns the flag
// vocabulary (global and per-context flags, mpirun's single-dash spellings)
// and the MPMD grammar `ctx : ctx : ...`; it starts nothing.
package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	"github.com/spf13/pflag"

	"prun/iof"
	"prun/jobspec"
	"prun/names"
)

// UsageError is bad input on the command line: prun prints it and exits 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// usagef formats a usage error. Control characters from the command line are
// escaped so that the message stays one line.
func usagef(format string, a ...any) error {
	msg := fmt.Sprintf(format, a...)
	if strings.IndexFunc(msg, unicode.IsControl) >= 0 {
		q := strconv.Quote(msg)
		msg = q[1 : len(q)-1]
	}
	return &UsageError{msg}
}

// Request is what a command line asks prun to do.
type Request struct {
	Job     *jobspec.Job
	Help    bool     // -h/--help: print usage, run nothing
	Version bool     // --version
	Exec    []string // --debug: run this debugger command (which runs prun) instead
	// Warnings are for stderr before the job runs ("-x FOO: not set...").
	Warnings []string
	place    spelledPlacement // the placement as spelled, for tests
}

// Env is how the parser sees the launcher's environment; tests substitute it.
type Env struct {
	LookupEnv func(string) (string, bool)
	Getwd     func() (string, error)
	LookPath  func(string) (string, error)
	ReadFile  func(string) ([]byte, error) // Open MPI's MCA parameter files; nil: none
	warn      func(string)                 // Parse's: collects Request.Warnings
}

func (e Env) warnf(format string, a ...any) {
	if e.warn != nil {
		e.warn(fmt.Sprintf(format, a...))
	}
}

// OSEnv is the real process environment.
var OSEnv = Env{LookupEnv: os.LookupEnv, Getwd: os.Getwd, LookPath: exec.LookPath, ReadFile: os.ReadFile}

// Parse reads a command line (without argv[0]).
func Parse(args []string, env Env) (*Request, error) {
	var warnings []string
	env.warn = func(w string) { warnings = append(warnings, w) }
	req, err := parse(args, env)
	if req != nil {
		req.Warnings = warnings
	}
	return req, err
}

// parser is one command line's parse: the global options and the job as
// they are built, phase by phase (parse).
type parser struct {
	env   Env
	g     globalOpts
	mca   *mcaParams // Open MPI's launcher parameters (cli/mca.go)
	place spelledPlacement
	job   *jobspec.Job
	ports [][2]int // --port-range
	// by application: -envall, --wdir given, its context's own --host
	// (once a later context gives one)
	envAll, wdirGiven []bool
	appHosts          []string
}

func parse(args []string, env Env) (*Request, error) {
	p := &parser{env: env, job: &jobspec.Job{CmdLine: "prun " + jobspec.ArgvString(args)}}
	if req, err := p.contexts(splitContexts(args)); req != nil || err != nil {
		return req, err // --help, --version, or an error
	}
	perContextHosts(p.job, p.appHosts, &p.g.place, env)
	// Each phase in the order its errors are reported.
	for _, phase := range []func() error{p.environment, p.processes, p.output, p.launch, p.interfaces} {
		if err := phase(); err != nil {
			return nil, err
		}
	}
	if p.g.debug {
		if v, _ := env.LookupEnv(UnderDebugger); v == "" {
			cmd, err := debuggerCommand(p.g.debuggers, args, p.job, env)
			if err != nil {
				return nil, err
			}
			return &Request{Job: p.job, Exec: cmd, place: p.place}, nil
		}
	}
	return &Request{Job: p.job, place: p.place}, nil
}

// contexts parses each context's flags and builds its app (or the apps of
// --app); the first context's flags include the global ones.
func (p *parser) contexts(segs [][]string) (*Request, error) {
	for i, seg := range segs {
		var c contextOpts
		var fs *pflag.FlagSet
		if i == 0 {
			fs = newFlagSet(&p.g, &c)
		} else {
			fs = newFlagSet(nil, &c)
		}
		globalsGo := "" // where global options go, when this context may not have them
		if i > 0 {
			globalsGo = "before the first program"
		}
		rest, err := parseFlags(fs, seg, globalsGo)
		if err == nil {
			err = checkRepeats(c.given, contextWhere(i, len(segs)))
		}
		if err != nil {
			return nil, err
		}
		if i == 0 {
			if err := p.globals(fs); err != nil {
				return nil, err
			}
		}
		c.npSet = npGiven(fs)
		if i == 0 && (p.g.help || p.g.version) {
			return &Request{Help: p.g.help, Version: p.g.version && !p.g.help}, nil
		}
		if i == 0 && p.g.appFile != "" {
			if len(rest) > 0 || len(segs) > 1 {
				return nil, usagef("--app %s gives the applications: no program may follow on the command line", p.g.appFile)
			}
			if c.npSet || c.wdir != "" {
				return nil, usagef("--app %s: give -n and --wdir in the file, for each application", p.g.appFile)
			}
			if p.job.Apps, err = appsFromFile(p.g.appFile, c.env, p.env); err != nil {
				return nil, err
			}
			for _, a := range p.job.Apps { // a line's own -H, as a later context's
				if a.Hosts != "" && a.Hostfile == "" {
					p.job.Place.Hosts = append(p.job.Place.Hosts, a.Hosts)
				}
			}
			break
		}
		app, err := buildApp(i, len(segs), rest, &c, p.env)
		if err != nil {
			return nil, err
		}
		if c.envAll && c.envNone {
			return nil, usagef("-envall and -envnone%s: give one", contextWhere(i, len(segs)))
		}
		app.Hostfile = c.hostfile
		p.job.Apps = append(p.job.Apps, app)
		p.appHosts = append(p.appHosts, strings.Join(c.hosts, ","))
		p.envAll = append(p.envAll, c.envAll)
		p.wdirGiven = append(p.wdirGiven, c.wdir != "")
	}
	return nil, nil
}

// globals checks the global options that need no app and resolves the
// placement: flags, then Hydra's variables and Open MPI's parameters.
func (p *parser) globals(fs *pflag.FlagSet) error {
	g, job, env := &p.g, p.job, p.env
	if fs.Changed("launch-fanout") && g.launch.fanout < 1 {
		return usagef("--launch-fanout %d: want 1 or more", g.launch.fanout)
	}
	if g.place.cpuSet != "" {
		// Open MPI 4's spelling of PRRTE's pe-list mapping.
		if g.place.mapBy != "" {
			return usagef("--cpu-set cannot be combined with --map-by %s (give --map-by pe-list=LIST:...)", g.place.mapBy)
		}
		g.place.mapBy = "pe-list=" + g.place.cpuSet
	}
	p.place = g.place.placement(fs, env)
	p.mca = &mcaParams{cmd: append(append([]string(nil), g.mca...), g.prteMCA...), env: env}
	applyHydraEnv(g, &p.place, env)
	if err := applyMCA(p.mca, g, &p.place, fs.Changed); err != nil {
		return err
	}
	if err := checkPlacement(&p.place); err != nil {
		return err
	}
	var err error
	if job.Place, err = p.place.resolve(); err != nil {
		return err
	}
	return nil
}

// environment gives every app the variables of --mca, -genv, -tune...,
// ahead of its own (a context's own -x of the same variable wins).
func (p *parser) environment() error {
	g, job, env := &p.g, p.job, p.env
	// --mca and -genv values go first: a context's own -x of the same
	// variable wins.
	var globalEnv []string
	var err error
	if p.ports, err = portRange(g.launch.ports, p.mca, env); err != nil {
		return err
	}
	ports := p.ports
	if _, set := env.LookupEnv("MPIR_CVAR_CH3_PORT_RANGE"); len(ports) == 1 && !set {
		// MPICH's own listeners in the range too, as under Hydra
		globalEnv = append(globalEnv, fmt.Sprintf("MPIR_CVAR_CH3_PORT_RANGE=%d:%d", ports[0][0], ports[0][1]))
	}
	if g.tune != "" {
		vars, err := tuneEnv(g.tune, env)
		if err != nil {
			return err
		}
		globalEnv = append(globalEnv, vars...)
	}
	if g.amca != "" {
		globalEnv = append(globalEnv, "OMPI_MCA_mca_base_param_file_prefix="+g.amca)
	}
	globalEnv = append(globalEnv, g.genv...)
	for _, v := range g.genvList {
		val, ok := env.LookupEnv(v)
		if !ok {
			env.warnf("-genvlist: %s is not set in prun's environment, not exported", v)
			continue
		}
		globalEnv = append(globalEnv, v+"="+val)
	}
	for _, kv := range g.mca {
		globalEnv = append(globalEnv, "OMPI_MCA_"+kv)
	}
	for _, kv := range g.pmixMCA {
		globalEnv = append(globalEnv, "PMIX_MCA_"+kv)
	}
	for _, kv := range g.prteMCA {
		globalEnv = append(globalEnv, "PRTE_MCA_"+kv)
	}
	if len(globalEnv) > 0 {
		for i := range job.Apps {
			job.Apps[i].Env = append(append([]string(nil), globalEnv...), job.Apps[i].Env...)
		}
	}
	if g.genvNone {
		for i := range job.Apps {
			job.Apps[i].EnvNone = i >= len(p.envAll) || !p.envAll[i]
		}
	}
	return nil
}

// processes: how ranks are started, restarted and told about the job.
func (p *parser) processes() error {
	g, job, env := &p.g, p.job, p.env
	for _, pf := range []struct{ flag, pattern string }{
		{"-prepend-pattern", g.prefixPat}, {"-outfile-pattern", g.outPat}, {"-errfile-pattern", g.errPat},
	} {
		if pf.pattern == "" {
			continue
		}
		if err := iof.CheckPattern(pf.pattern); err != nil {
			return usagef("%s %q: %v", pf.flag, pf.pattern, err)
		}
		if pf.flag != "-prepend-pattern" && (g.outputFile != "" || outputFiles(g.output)) {
			return usagef("%s and --output-filename or --output dir=/file=: give one", pf.flag)
		}
	}
	job.Verbose, job.Profile, job.OutputPrefix = g.verbose, g.profile, g.prefixPat
	job.OutfilePattern, job.ErrfilePattern = g.outPat, g.errPat
	switch g.usize {
	case "", "SYSTEM":
	case "INFINITE":
		job.UnivSize = jobspec.UnivInfinite
	default:
		n, err := strconv.Atoi(g.usize)
		if err != nil || n < 1 {
			return usagef("-usize %s: want a number of processes, SYSTEM or INFINITE", g.usize)
		}
		job.UnivSize = n
	}
	job.Quiet, job.ReportPID, job.ReportURI, job.OutputProctable = g.quiet, g.reportPID, g.reportURI, g.proctable
	job.DVM, job.DVMWait = g.dvm, g.dvmWait
	job.PreloadBinary, job.ShowProgress, job.EnableRecovery = g.preloadBin, g.progress, g.recovery
	job.PrimaryStatus = g.primaryStatus
	if g.maxRestarts < 0 {
		return usagef("--max-restarts %d: want 0 or more", g.maxRestarts)
	}
	job.MaxRestarts = g.maxRestarts
	if g.continuous {
		if g.maxRestarts > 0 {
			return usagef("--continuous and --max-restarts: give one")
		}
		job.MaxRestarts = jobspec.RestartsUnlimited // Open MPI's continuous operation
	}
	job.NoHostnamePropagation = g.noHostProp
	if g.enableX {
		return usagef("-enable-x: prun's SSH client forwards no X connections (run the X client with DISPLAY set by -x, or through your own ssh -X)")
	}
	for _, r := range refusedFlags {
		if v := *g.refused[r.name]; v != "" && !(r.noValue && v == "false") {
			return usagef("--%s: %s", r.name, r.why)
		}
	}
	if g.preloadList != "" {
		files, err := preloadFiles(g.preloadList, env)
		if err != nil {
			return err
		}
		job.PreloadFiles = files
	}
	job.IndexArgv, job.CwdSessionDir, job.DebugDaemons = g.indexArgv, g.cwdSession, g.debugDaemon
	if g.xterm != "" {
		x, err := jobspec.ParseXterm(g.xterm)
		if err != nil {
			return usagef("--xterm %s: %v", g.xterm, err)
		}
		job.Xterm = x
	}
	psets := map[string]int{}
	for i, a := range job.Apps {
		if a.Pset == "" {
			continue
		}
		if j, dup := psets[a.Pset]; dup {
			return usagef("--pset %s in application contexts %d and %d: each context is a process set of its own", a.Pset, j+1, i+1)
		}
		psets[a.Pset] = i
	}
	if g.cwdSession {
		for i, given := range p.wdirGiven {
			if given {
				return usagef("--set-cwd-to-session-dir and --wdir%s: give one", contextWhere(i, len(job.Apps)))
			}
		}
	}
	return nil
}

// output: the --output forms and their older spellings, the report.
func (p *parser) output() error {
	g, job := &p.g, p.job
	job.TagOutput = g.tagOutput
	forms := append([]string(nil), g.output...)
	if g.tagOutput {
		forms = append(forms, "tag")
	}
	if g.timestamp {
		forms = append(forms, "timestamp")
	}
	if g.outputFile != "" {
		forms = append(forms, "dir="+g.outputFile)
	}
	if g.label {
		forms = append(forms, "rank")
	}
	if g.mergeStderr {
		forms = append(forms, "merge-stderr-to-stdout")
	}
	if g.xml {
		forms = append(forms, "xml")
	}
	if err := parseOutput(strings.Join(forms, ","), &job.Output); err != nil {
		return usagef("%v", err)
	}
	job.Report, job.ReportStateOnTimeout, job.GetStackTraces = g.report, g.stateOnTO, g.stackTraces
	job.PrintExitCodes = g.exitCodes
	return nil
}

// launch: how daemons reach the other nodes, and the name server.
func (p *parser) launch() error {
	g, job, env := &p.g, p.job, p.env
	if g.genvAll && g.genvNone {
		return usagef("-genvall and -genvnone: give one")
	}
	job.EnvAll = g.genvAll
	if g.nameServer != "" {
		addr, err := names.ParseHydraAddr(g.nameServer)
		if err != nil {
			return usagef("-nameserver %v", err)
		}
		job.NameServer = addr
	}
	if g.launch.prefix != "" && !filepath.IsAbs(g.launch.prefix) {
		return usagef("--prefix %s: want an absolute directory", g.launch.prefix)
	}
	if g.launch.rsh == "" && g.launcher == "" {
		g.launcher, g.launch.rsh = remoteShell(p.mca, env)
	}
	localOnly, agent := false, ""
	switch g.launcher {
	case "fork":
		localOnly = true
	case "", "auto":
	case "ssh":
		agent = "ssh"
	case "rsh":
		agent = "ssh"
		if g.launch.rsh == "" {
			g.launch.rsh = "rsh"
		}
	case "slurm":
		if g.launch.rsh != "" {
			return usagef("-launcher slurm and --rsh %s: give one", g.launch.rsh)
		}
		agent = "slurm"
	default:
		return usagef("-launcher %s: prun starts daemons with ssh, rsh, --rsh CMD or slurm (srun; auto: slurm inside an allocation), fork: this node only", g.launcher)
	}
	job.Launch = jobspec.Launch{Prefix: g.launch.prefix, Rsh: g.launch.rsh, Fanout: g.launch.fanout, IfInclude: g.launch.ifInclude,
		LocalOnly: localOnly, Ports: p.ports, Agent: agent}
	return nil
}

// interfaces: stdin, the pseudo-terminal, PMI, the timeout.
func (p *parser) interfaces() error {
	g, job, env := &p.g, p.job, p.env
	switch g.stdin {
	case "all":
		job.Stdin = jobspec.StdinAll
	case "none":
		job.Stdin = jobspec.StdinNone
	default:
		n, err := strconv.Atoi(g.stdin)
		if err != nil || n < 0 {
			return usagef("--stdin %s: want a rank number, all or none", g.stdin)
		}
		job.Stdin = n
	}
	switch g.pty {
	case "":
		job.PTY = jobspec.PTYAuto
	case "true":
		job.PTY = jobspec.PTYOn
	case "false":
		job.PTY = jobspec.PTYOff
	default:
		return usagef("--pty=%s: want true or false", g.pty)
	}
	switch g.pmi {
	case jobspec.PMIAuto, jobspec.PMIx, jobspec.PMI1, jobspec.PMI2, jobspec.PMINone:
		job.PMI = g.pmi
	default:
		return usagef("--pmi %s: want auto, pmix, pmi1, pmi2 or none", g.pmi)
	}
	if g.pmiPort && (g.pmi == jobspec.PMIx || g.pmi == jobspec.PMINone) {
		return usagef("-pmi-port serves PMI-1 and PMI-2 clients: not with --pmi %s", g.pmi)
	}
	job.PMIPort = g.pmiPort
	envTimeout, _ := env.LookupEnv("MPIEXEC_TIMEOUT")
	t, err := parseTimeout(g.timeout, envTimeout)
	job.Timeout = t
	return err
}

// displays types --display's words (checked with the other placement values).
func displays(words []string) []jobspec.Display {
	var d []jobspec.Display
	for _, w := range words {
		d = append(d, jobspec.Display(w))
	}
	return d
}
