package cli

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"prun/jobspec"
)

// withVars is testEnv with exactly vars for an environment.
func withVars(t *testing.T, vars map[string]string) Env {
	env, _ := testEnv(t)
	env.LookupEnv = func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	return env
}

// Open MPI's launcher MCA parameters steer prun where its flags say
// nothing: from --mca (or --prtemca), else the environment, else the
// user's parameter file, else the system's.
func TestLauncherMCA(t *testing.T) {
	with := func(vars, files map[string]string) Env {
		env := withVars(t, vars)
		env.ReadFile = func(p string) ([]byte, error) {
			if text, ok := files[p]; ok {
				return []byte(text), nil
			}
			return nil, fs.ErrNotExist
		}
		return env
	}
	sys := "/etc/openmpi/openmpi-mca-params.conf"
	user := "/home/u/.openmpi/mca-params.conf"
	home := map[string]string{"HOME": "/home/u"}
	for _, tc := range []struct {
		name, args   string
		vars, files  map[string]string
		mapBy, bind  string
		compat       string
		origin, host string
		tag          bool
	}{
		{name: "nothing", args: "./app"},
		{name: "env", args: "./app", vars: map[string]string{"OMPI_MCA_rmaps_base_oversubscribe": "1"}, compat: "oversubscribe"},
		{name: "env false", args: "./app", vars: map[string]string{"OMPI_MCA_rmaps_base_oversubscribe": "no"}},
		{name: "--mca wins over env", args: "--mca rmaps_base_oversubscribe 0 ./app", vars: map[string]string{"OMPI_MCA_rmaps_base_oversubscribe": "true"}},
		{name: "system file", args: "./app", files: map[string]string{sys: "# c\nbtl = ^openib\nrmaps_base_mapping_policy = node # by node\nhwloc_base_binding_policy=\"core\"\n"},
			mapBy: "node", bind: "core", origin: sys + ": rmaps_base_mapping_policy=node"},
		{name: "user file first", args: "./app", vars: home, files: map[string]string{sys: "rmaps_base_mapping_policy = node\n", user: "rmaps_base_mapping_policy = slot\n"},
			mapBy: "slot", origin: user + ": rmaps_base_mapping_policy=slot"},
		{name: "env over files", args: "./app", vars: map[string]string{"OMPI_MCA_rmaps_base_mapping_policy": "core"}, files: map[string]string{sys: "rmaps_base_mapping_policy = node\n"},
			mapBy: "core", origin: "OMPI_MCA_rmaps_base_mapping_policy=core"},
		{name: "param files named", args: "./app", vars: map[string]string{"OMPI_MCA_mca_base_param_files": "/x.conf"}, files: map[string]string{sys: "rmaps_base_mapping_policy = node\n", "/x.conf": "orte_tag_output = 1\n"},
			tag: true},
		{name: "flag wins", args: "--map-by core --bind-to none ./app", vars: map[string]string{"OMPI_MCA_rmaps_base_mapping_policy": "node", "OMPI_MCA_hwloc_base_binding_policy": "core"},
			mapBy: "core", bind: "none"},
		{name: "old spellings win", args: "--npernode 1 --bind-to-core ./app", vars: map[string]string{"OMPI_MCA_rmaps_base_mapping_policy": "node", "OMPI_MCA_hwloc_base_binding_policy": "none"},
			compat: "npernode,bind-to-core"},
		{name: "PRRTE's", args: "--prtemca rmaps_default_mapping_policy :oversubscribe ./app", mapBy: ":oversubscribe",
			origin: "--mca rmaps_default_mapping_policy=:oversubscribe"},
		{name: "PRRTE's env", args: "./app", vars: map[string]string{"PRTE_MCA_hwloc_default_binding_policy": "package"}, bind: "package"},
		{name: "hwthreads, default hostfile", args: "./app", vars: map[string]string{"OMPI_MCA_hwloc_base_use_hwthreads_as_cpus": "yes", "OMPI_MCA_orte_default_hostfile": "/hf"},
			compat: "use-hwthread-cpus", host: "/hf"},
	} {
		req, err := Parse(strings.Fields(tc.args), with(tc.vars, tc.files))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		pl := req.place
		var compat []string
		for _, c := range pl.Compat {
			compat = append(compat, c[0])
		}
		if pl.MapBy != tc.mapBy || pl.BindTo != tc.bind || strings.Join(compat, ",") != tc.compat || pl.Origin["map-by"] != tc.origin ||
			pl.Hostfile != tc.host || req.Job.TagOutput != tc.tag {
			t.Errorf("%s: map-by %q bind-to %q compat %q origin %q hostfile %q tag %v", tc.name, pl.MapBy, pl.BindTo, compat, pl.Origin, pl.Hostfile, req.Job.TagOutput)
		}
	}
	_, err := Parse([]string{"./app"}, with(map[string]string{"OMPI_MCA_rmaps_base_oversubscribe": "maybe"}, nil))
	if err == nil || err.Error() != "OMPI_MCA_rmaps_base_oversubscribe=maybe: want a boolean (1, 0, true, false, yes, no)" {
		t.Errorf("bad boolean: %v", err)
	}
	// plm_rsh_agent from the user's file: prun's --rsh
	req, err := Parse([]string{"./app"}, with(home, map[string]string{user: "plm_rsh_agent = sh -x\n"}))
	if err != nil || req.Job.Launch.Rsh != "sh -x" {
		t.Errorf("plm_rsh_agent from a file: %v %+v", err, req)
	}
	for v, want := range map[string]bool{"true": true, "1": true, "Yes": true, "enabled": true, "0": false, "false": false, "N": false, "": false, "2": true} {
		if got, ok := mcaBool(v); !ok || got != want {
			t.Errorf("mcaBool(%q) = %v, %v", v, got, ok)
		}
	}
}

// The control plane's ports: --port-range, else Hydra's MPIEXEC_PORT_RANGE,
// else Open MPI's oob_tcp_dynamic_ipv4_ports; MPICH's processes get a
// single range as MPIR_CVAR_CH3_PORT_RANGE unless it is set.
func TestPortRange(t *testing.T) {
	for _, tc := range []struct {
		args  string
		vars  map[string]string
		ports string
		cvar  string
	}{
		{"./app", nil, "[]", ""},
		{"--port-range 50000:50010 ./app", map[string]string{"MPIEXEC_PORT_RANGE": "1:2"}, "[[50000 50010]]", "50000:50010"},
		{"./app", map[string]string{"MPIEXEC_PORT_RANGE": "1:2", "OMPI_MCA_oob_tcp_dynamic_ipv4_ports": "3-4"}, "[[1 2]]", "1:2"},
		{"./app", map[string]string{"MPIEXEC_PORTRANGE": "5-6"}, "[[5 6]]", "5:6"},
		{"--mca oob_tcp_dynamic_ipv4_ports 3-4,8 ./app", nil, "[[3 4] [8 8]]", ""},
		{"--port-range 7:9 ./app", map[string]string{"MPIR_CVAR_CH3_PORT_RANGE": "10:20"}, "[[7 9]]", ""},
	} {
		req, err := Parse(strings.Fields(tc.args), withVars(t, tc.vars))
		if err != nil {
			t.Errorf("%s %v: %v", tc.args, tc.vars, err)
			continue
		}
		cvar := ""
		for _, kv := range req.Job.Apps[0].Env {
			if v, ok := strings.CutPrefix(kv, "MPIR_CVAR_CH3_PORT_RANGE="); ok {
				cvar = v
			}
		}
		if got := fmt.Sprint(req.Job.Launch.Ports); got != tc.ports || cvar != tc.cvar {
			t.Errorf("%s %v: ports %s, MPICH's %q; want %s, %q", tc.args, tc.vars, got, cvar, tc.ports, tc.cvar)
		}
	}
	for args, want := range map[string]string{
		"--port-range 9:1 ./app":                  "--port-range 9:1: want ports from 1 to 65535, the lower first",
		"--mca oob_tcp_static_ipv4_ports x ./app": "--mca oob_tcp_static_ipv4_ports=x: want LOW:HIGH, LOW-HIGH or a port",
	} {
		if _, err := Parse(strings.Fields(args), withVars(t, nil)); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}

// Hydra's environment variables, as mpiexec.hydra reads them, where flags
// say nothing.
func TestHydraEnv(t *testing.T) {
	req, err := Parse([]string{"./app"}, withVars(t, map[string]string{"HYDRA_LAUNCHER": "fork", "HYDRA_IFACE": "eth1",
		"HYDRA_MAPPING": "core", "HYDRA_BINDING": "socket", "HYDRA_MEMBIND": "firsttouch", "HYDRA_RMK": "user", "HYDRA_DEBUG": "1"}))
	if err != nil {
		t.Fatal(err)
	}
	j := req.Job
	if !j.Launch.LocalOnly || j.Launch.IfInclude != "eth1" || req.place.MapBy != "core" || req.place.BindTo != "socket" ||
		req.place.MemBind != "firsttouch" || j.Place.RM != "user" || !j.Verbose || req.place.Origin["bind-to"] != "HYDRA_BINDING=socket" {
		t.Errorf("%+v %+v verbose %v", j.Launch, j.Place, j.Verbose)
	}
	// flags win; Hydra's launchers that prun has no use for change nothing
	req, err = Parse(strings.Fields("-launcher ssh -iface eth0 --map-by slot ./app"), withVars(t, map[string]string{"HYDRA_BOOTSTRAP": "fork",
		"HYDRA_IFACE": "eth1", "HYDRA_MAPPING": "core", "HYDRA_BINDING": "none"}))
	if err != nil {
		t.Fatal(err)
	}
	if j := req.Job; j.Launch.LocalOnly || j.Launch.IfInclude != "eth0" || req.place.MapBy != "slot" || req.place.BindTo != "none" {
		t.Errorf("flags: %+v %+v", j.Launch, j.Place)
	}
	req, err = Parse(strings.Fields("-ppn 1 ./app"), withVars(t, map[string]string{"HYDRA_LAUNCHER": "slurm", "HYDRA_MAPPING": "core", "HYDRA_BOOTSTRAP_EXEC": "/usr/bin/rsh -x"}))
	if err != nil {
		t.Fatal(err)
	}
	if j := req.Job; j.Launch.LocalOnly || req.place.MapBy != "" || j.Launch.Rsh != "/usr/bin/rsh -x" {
		t.Errorf("slurm, -ppn: %+v %+v", j.Launch, j.Place)
	}
}

func TestGenvAll(t *testing.T) {
	env, _ := testEnv(t)
	if req, err := Parse(strings.Fields("-genvall ./app"), env); err != nil || !req.Job.EnvAll {
		t.Errorf("-genvall: %v", err)
	}
	if _, err := Parse(strings.Fields("-genvall -genvnone ./app"), env); err == nil || err.Error() != "-genvall and -genvnone: give one" {
		t.Errorf("-genvall -genvnone: %v", err)
	}
	hydra := withVars(t, map[string]string{"HYDRA_ENV": "all"})
	if req, err := Parse(strings.Fields("./app"), hydra); err != nil || !req.Job.EnvAll {
		t.Errorf("HYDRA_ENV=all: %v", err)
	}
	if req, err := Parse(strings.Fields("-genvnone ./app"), hydra); err != nil || req.Job.EnvAll {
		t.Errorf("HYDRA_ENV=all -genvnone: %v", err)
	}
}

func TestReportChildJobsSeparately(t *testing.T) {
	env, _ := testEnv(t)
	req, err := Parse(strings.Fields("--enable-recovery -report-child-jobs-separately ./app"), env)
	if err != nil || !req.Job.PrimaryStatus || !req.Job.EnableRecovery {
		t.Errorf("%v %+v", err, req)
	}
}

func TestContinuous(t *testing.T) {
	env, _ := testEnv(t)
	if req, err := Parse(strings.Fields("--continuous ./app"), env); err != nil || req.Job.MaxRestarts != jobspec.RestartsUnlimited {
		t.Errorf("--continuous: %v %+v", err, req)
	}
	if _, err := Parse(strings.Fields("--continuous --max-restarts 3 ./app"), env); err == nil || err.Error() != "--continuous and --max-restarts: give one" {
		t.Errorf("--continuous --max-restarts 3: %v", err)
	}
}

// The peers' options prun does not do say why, not "unknown flag".
func TestRefusedFlags(t *testing.T) {
	env, _ := testEnv(t)
	for args, want := range map[string]string{
		"-ompi-server file:/x ./app": "--ompi-server: prun does not speak Open MPI's ompi-server protocol: run hydra_nameserver and give -nameserver",
		"--hnp uri ./app":            "--hnp: prun keeps no persistent virtual machine",
		"-report-events x ./app":     "--report-events: prun reports a run's events in one JSON file instead: --report FILE",
		"-gpus-per-proc 2 ./app":     "--gpus-per-proc: prun assigns no GPUs",
	} {
		if _, err := Parse(strings.Fields(args), env); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
	if j, err := Parse(strings.Fields("--dvm x --wait ./app"), env); err != nil || j.Job.DVM != "x" || !j.Job.DVMWait {
		t.Errorf("--dvm x --wait: %v", err)
	}
}
