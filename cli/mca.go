package cli

import (
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"prun/jobspec"
)

// Open MPI's launcher reads its own MCA parameters from the command line
// (--mca), the environment (OMPI_MCA_name) and parameter files, and CI
// setups lean on them: OMPI_MCA_rmaps_base_oversubscribe=1 on a 2-core
// runner, a mapping policy in /etc/openmpi/openmpi-mca-params.conf. prun
// passes every one to the processes; these few also steer prun itself,
// where its own flags do not say otherwise. PRRTE's names (Open MPI 5's
// launcher: --prtemca, PRTE_MCA_name) count the same.

// mcaParams finds launcher MCA parameters as Open MPI does: the last
// --mca (or --prtemca) on the command line, else the environment, else the
// first parameter file that sets it (the user's before the system's).
type mcaParams struct {
	cmd   []string // KEY=VALUE, --mca's then --prtemca's
	env   Env
	files []mcaFile // read on first use
	read  bool
}

type mcaFile struct {
	path string
	vals map[string]string
}

// get returns a parameter's value and where it came from, for messages
// ("OMPI_MCA_rmaps_base_oversubscribe", "--mca rmaps_base_oversubscribe",
// "/etc/openmpi/openmpi-mca-params.conf: rmaps_base_oversubscribe").
func (m *mcaParams) get(names ...string) (val, from string, ok bool) {
	if val, from, ok = m.lookup(names); ok {
		return val, from, ok
	}
	m.readFiles()
	for _, f := range m.files {
		for _, name := range names {
			if v, found := f.vals[name]; found {
				return v, f.path + ": " + name, true
			}
		}
	}
	return "", "", false
}

// lookup looks on the command line and in the environment only.
func (m *mcaParams) lookup(names []string) (val, from string, ok bool) {
	for _, name := range names {
		for i := len(m.cmd) - 1; i >= 0; i-- {
			if k, v, _ := strings.Cut(m.cmd[i], "="); k == name {
				return strings.TrimSpace(v), "--mca " + name, true
			}
		}
	}
	for _, name := range names {
		for _, pre := range []string{"OMPI_MCA_", "PRTE_MCA_"} {
			if v, found := m.env.LookupEnv(pre + name); found {
				return strings.TrimSpace(v), pre + name, true
			}
		}
	}
	return "", "", false
}

// readFiles reads Open MPI's parameter files: mca_base_param_files if set,
// else the user's ~/.openmpi/mca-params.conf and the system's (Debian's
// /etc/openmpi, a source install's /usr/local/etc, $OPAL_PREFIX/etc).
// A file that cannot be read sets nothing, as under Open MPI.
func (m *mcaParams) readFiles() {
	if m.read || m.env.ReadFile == nil {
		return
	}
	m.read = true
	var paths []string
	if list, _, ok := m.lookup([]string{"mca_base_param_files"}); ok {
		paths = strings.Split(list, ":")
	} else {
		if home, _ := m.env.LookupEnv("HOME"); home != "" {
			paths = append(paths, filepath.Join(home, ".openmpi", "mca-params.conf"))
		}
		if prefix, _ := m.env.LookupEnv("OPAL_PREFIX"); prefix != "" {
			paths = append(paths, filepath.Join(prefix, "etc", "openmpi-mca-params.conf"))
		}
		paths = append(paths, "/etc/openmpi/openmpi-mca-params.conf", "/usr/local/etc/openmpi-mca-params.conf")
	}
	for _, p := range paths {
		if p == "" {
			continue
		}
		data, err := m.env.ReadFile(p)
		if err != nil {
			continue
		}
		m.files = append(m.files, mcaFile{path: p, vals: parseMCAFile(string(data))})
	}
}

// parseMCAFile reads "name = value" lines; # starts a comment.
func parseMCAFile(text string) map[string]string {
	vals := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		vals[k] = v
	}
	return vals
}

// mcaBool reads an MCA boolean as Open MPI does.
func mcaBool(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "true", "yes", "t", "y", "enabled", "on":
		return true, true
	case "false", "no", "f", "n", "disabled", "off", "":
		return false, true
	}
	n, err := strconv.Atoi(v)
	return n != 0, err == nil
}

// policiesGiven reports whether mpirun's older spellings on the command
// line (--npernode, --bind-to-core, a rankfile...) already say how to map
// and bind: then no parameter or environment variable does.
func policiesGiven(pl *spelledPlacement) (maps, binds bool) {
	maps = pl.Rankfile != "" || slices.ContainsFunc(pl.Compat, func(c [2]string) bool {
		switch c[0] {
		case "npernode", "npersocket", "ppn", "ppr", "pernode", "bynode", "byslot", "bycore", "bysocket":
			return true
		}
		return false
	})
	binds = slices.ContainsFunc(pl.Compat, func(c [2]string) bool { return strings.HasPrefix(c[0], "bind-to-") })
	return maps, binds
}

// applyMCA sets what the launcher MCA parameters say, where the command
// line's own flags left it unset: mapping, ranking and binding policies
// (Placement.Origin names the parameter for their errors),
// oversubscription, hardware threads as CPUs, the map and binding reports,
// tagged and timestamped output, and the default hostfile.
func applyMCA(m *mcaParams, g *globalOpts, pl *spelledPlacement, changed func(string) bool) error {
	mapsGiven, bindsGiven := policiesGiven(pl)
	for _, p := range []struct {
		flag  string
		names []string
		dst   *string
		given bool
	}{
		{"map-by", []string{"rmaps_base_mapping_policy", "rmaps_default_mapping_policy"}, &pl.MapBy, mapsGiven},
		{"rank-by", []string{"rmaps_base_ranking_policy", "rmaps_default_ranking_policy"}, &pl.RankBy, false},
		{"bind-to", []string{"hwloc_base_binding_policy", "hwloc_default_binding_policy"}, &pl.BindTo, bindsGiven},
	} {
		if *p.dst != "" || p.given {
			continue
		}
		if v, from, ok := m.get(p.names...); ok && v != "" {
			*p.dst = v
			if pl.Origin == nil {
				pl.Origin = map[string]string{}
			}
			pl.Origin[p.flag] = from + "=" + v
		}
	}
	// The command line's own --map-by qualifiers say what the parameters
	// below would contradict: they win, as its flags do. (A policy that
	// does not parse is resolve's error.)
	var cmdMap jobspec.MapPolicy
	if pl.Origin["map-by"] == "" && pl.MapBy != "" {
		cmdMap, _ = jobspec.ParseMapBy(pl.MapBy)
	}
	for _, b := range []struct {
		name string
		set  func()
		skip bool
	}{
		{"rmaps_base_oversubscribe", func() { pl.Compat = append(pl.Compat, [2]string{"oversubscribe", ""}) },
			changed("nooversubscribe") || cmdMap.NoOversubscribe},
		{"rmaps_base_no_oversubscribe", func() { pl.Compat = append(pl.Compat, [2]string{"nooversubscribe", ""}) },
			changed("oversubscribe") || cmdMap.Oversubscribe},
		{"hwloc_base_use_hwthreads_as_cpus", func() { pl.Compat = append(pl.Compat, [2]string{"use-hwthread-cpus", ""}) },
			changed("use-hwthread-cpus") || cmdMap.CoreCPUs},
		{"rmaps_base_display_map", func() { pl.Display = append(pl.Display, jobspec.DisplayMap) }, false},
		{"hwloc_base_report_bindings", func() { pl.ReportBindings = true }, false},
		{"orte_tag_output", func() { g.tagOutput = true }, false},
		{"orte_timestamp_output", func() { g.timestamp = true }, false},
	} {
		if b.skip {
			continue
		}
		v, from, ok := m.get(b.name)
		if !ok {
			continue
		}
		on, valid := mcaBool(v)
		if !valid {
			return usagef("%s=%s: want a boolean (1, 0, true, false, yes, no)", from, v)
		}
		if on {
			b.set()
		}
	}
	if pl.Hostfile == "" {
		if v, _, ok := m.get("orte_default_hostfile"); ok && v != "" && v != "none" {
			pl.Hostfile = v
		}
	}
	return nil
}

// portRange is where the control plane may listen: --port-range, else
// Hydra's MPIEXEC_PORT_RANGE (or MPIEXEC_PORTRANGE), else Open MPI's
// oob_tcp_dynamic_ipv4_ports or oob_tcp_static_ipv4_ports.
func portRange(flag string, m *mcaParams, env Env) ([][2]int, error) {
	spec, from := flag, "--port-range "
	for _, v := range []string{"MPIEXEC_PORT_RANGE", "MPIEXEC_PORTRANGE"} {
		if spec == "" {
			spec, _ = env.LookupEnv(v)
			from = v + "="
		}
	}
	if spec == "" {
		var ok bool
		if spec, from, ok = m.get("oob_tcp_dynamic_ipv4_ports", "oob_tcp_static_ipv4_ports"); !ok {
			return nil, nil
		}
		from += "="
	}
	if spec = strings.TrimSpace(spec); spec == "" {
		return nil, nil
	}
	ports, err := jobspec.ParsePorts(spec)
	if err != nil {
		return nil, usagef("%s%s: %v", from, spec, err)
	}
	return ports, nil
}
