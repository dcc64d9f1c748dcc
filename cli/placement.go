// The placement options as spelled (--map-by, --rank-by, --bind-to and their older spellings) resolved into a jobspec.Placement.

package cli

import (
	"cmp"
	"errors"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"prun/jobspec"
)

// spelledPlacement is the placement as the command line, Open MPI's MCA
// parameters and Hydra's variables spell it; resolve parses its policies
// into the job spec's. Its string fields shadow the Placement's policies.
type spelledPlacement struct {
	jobspec.Placement
	MapBy, RankBy, BindTo, MemBind string
	// Origin names where MapBy, RankBy or BindTo came from when not the
	// command line ("map-by": "OMPI_MCA_rmaps_base_mapping_policy=node"),
	// for their errors.
	Origin         map[string]string
	Compat         [][2]string // mpirun's older spellings in order: {"npernode","2"}, {"oversubscribe",""}, ...
	ReportBindings bool
	// Given is every value given to the single-valued placement options
	// on the command line, in order (repeat.go).
	Given []givenValue
}

// resolve parses the policies, then applies mpirun's older spellings over
// them (ApplyCompat). Every error is a usage error naming the flag, or the
// variable the value came from; a conflict names both sides as given.
func (sp *spelledPlacement) resolve() (jobspec.Placement, error) {
	pl := sp.Placement
	origin := func(flag string, err error) error {
		if o := sp.Origin[flag]; o != "" {
			return usagef("%s: %v", o, err)
		}
		return usagef("%v", err)
	}
	// A single-valued option given twice must say the same both times.
	if err := checkRepeats(sp.Given, ""); err != nil {
		return pl, err
	}
	var err error
	mapBy := sp.MapBy
	if mapBy == "" && pl.Rankfile != "" {
		mapBy = "rankfile"
	}
	if mapBy != "" {
		if pl.MapBy, err = jobspec.ParseMapBy(mapBy); err != nil {
			return pl, origin("map-by", err)
		}
	}
	if sp.RankBy != "" {
		if pl.RankBy, err = jobspec.ParseRankBy(sp.RankBy); err != nil {
			return pl, origin("rank-by", err)
		}
	}
	if sp.BindTo != "" {
		if pl.BindTo, err = jobspec.ParseBindTo(sp.BindTo); err != nil {
			return pl, origin("bind-to", err)
		}
	}
	if sp.MemBind != "" {
		if pl.MemBind, err = jobspec.ParseMemBind(sp.MemBind); err != nil {
			return pl, usagef("%v", err) // it names the flag
		}
	}
	// Where each aspect of the placement (conflictError's) came from, as
	// given, for the conflicts of the older spellings with it.
	from := map[string]string{}
	mapFrom := cmp.Or(sp.Origin["map-by"], sp.spelled("map-by"), sp.spelled("cpu-set"), sp.spelled("rankfile"))
	if pl.MapBy.By != jobspec.MapDefault {
		from["map"] = mapFrom
	}
	if pl.MapBy.PE > 0 {
		from["pe"] = mapFrom
	}
	if pl.BindTo.To != jobspec.BindDefault {
		from["bind"] = cmp.Or(sp.Origin["bind-to"], sp.spelled("bind-to"))
	}
	// A rankfile is a mapping: --map-by may only qualify it. (An Open MPI
	// parameter's or Hydra's variable's policy does not apply beside one.)
	if rf := sp.spelled("rankfile"); pl.Rankfile != "" && sp.MapBy != "" {
		switch {
		case pl.MapBy.By == jobspec.MapDefault: // qualifiers only
			pl.MapBy.By = jobspec.MapRankfile
			if err := pl.MapBy.Check(); err != nil {
				return pl, usagef("%s with %s: %v", mapFrom, rf, err)
			}
			from["map"] = rf
		case pl.MapBy.By != jobspec.MapRankfile ||
			pl.MapBy.File != "" && filepath.Clean(pl.MapBy.File) != filepath.Clean(pl.Rankfile):
			return pl, usagef("%s conflicts with %s", mapFrom, rf)
		}
	}
	for _, c := range sp.Compat {
		err := ApplyCompat(&pl, c[0], c[1])
		var conflict *conflictError
		if errors.As(err, &conflict) && from[conflict.what] != "" {
			return pl, usagef("%s conflicts with %s", conflict.opt, from[conflict.what])
		}
		if err != nil {
			return pl, usagef("%v", err) // it names the option
		}
		if a := compatAspect(c[0]); a != "" && from[a] == "" {
			from[a] = compatSpelling(c[0], c[1])
		}
	}
	// Hydra's --bind-to core:N is PE=N too (the mapper applies it).
	if n := pl.BindTo.Count; n > 1 && pl.MapBy.PE > 0 && pl.MapBy.PE != n {
		return pl, usagef("%s conflicts with %s", from["bind"], from["pe"])
	}
	pl.BindTo.Report = pl.BindTo.Report || sp.ReportBindings
	if pl.Rankfile == "" {
		pl.Rankfile = pl.MapBy.File
	}
	return pl, nil
}

// spelled is the first value given to option key on the command line, as
// given ("--map-by node"); "" if none.
func (sp *spelledPlacement) spelled(key string) string {
	for _, g := range sp.Given {
		if g.key == key {
			return g.String()
		}
	}
	return ""
}

// placement turns the flags into the job spec, in the order mpirun applies
// its old spellings.
func (p *placeOpts) placement(fs *pflag.FlagSet, env Env) spelledPlacement {
	pl := spelledPlacement{Placement: jobspec.Placement{
		Hostfile: p.hostfile, Rankfile: p.rankfile,
		Topology: p.topology, Display: displays(p.display), DoNotLaunch: p.doNotLaunch,
		AddHosts: p.addHosts, LocalHost: p.localHost,
		RM: strings.ToLower(p.rmk), OrderNodes: strings.ToLower(p.orderNodes), MaxNodes: p.maxNodes,
	}, MapBy: p.mapBy, RankBy: p.rankBy, BindTo: p.bindTo, MemBind: p.memBind, ReportBindings: p.reportBindings, Given: p.given}
	if p.ppr != "" {
		pl.Compat = append(pl.Compat, [2]string{"ppr", p.ppr})
	}
	// Hydra's host lists (-f, -hosts, HYDRA_HOST_FILE) are placed as Hydra
	// places them: round after round when the job is larger.
	hydra := p.hydraFile != "" || fs.Changed("hosts")
	if pl.Hostfile == "" {
		pl.Hostfile = p.hydraFile
	}
	if pl.Hostfile == "" {
		pl.Hostfile = p.fallbackHostfile(env)
		if f, _ := env.LookupEnv("HYDRA_HOST_FILE"); pl.Hostfile != "" && pl.Hostfile == f && len(p.hosts) == 0 {
			hydra = true
		}
	}
	pl.Hosts = p.hosts
	if p.displayMap {
		pl.Display = append(pl.Display, jobspec.DisplayMap)
	}
	if p.displayAlloc {
		pl.Display = append(pl.Display, jobspec.DisplayAllocation)
	}
	if p.displayTopo {
		pl.Display = append(pl.Display, jobspec.DisplayTopo)
	}
	if p.rankMap {
		pl.Display = append(pl.Display, jobspec.DisplayRankMap)
	}
	for _, c := range compatFlags {
		name := c.name
		if c.as != "" {
			name = c.as
		}
		switch {
		case c.n && fs.Changed(c.name):
			pl.Compat = append(pl.Compat, [2]string{name, strconv.Itoa(*p.compatN[c.name])})
		case !c.n && *p.compatSet[c.name]:
			pl.Compat = append(pl.Compat, [2]string{name, ""})
		}
	}
	if hydra {
		pl.Compat = append(pl.Compat, [2]string{"hydra-hosts", ""})
	}
	return pl
}

// refusedFlags are the peers' options prun knows and does not do: each is
// a usage error that says why and what to use, rather than "unknown flag".
var refusedFlags = []struct {
	name, why string
	noValue   bool
}{
	{name: "ompi-server", why: "prun does not speak Open MPI's ompi-server protocol: run hydra_nameserver and give -nameserver HOST[:PORT] to every launch that shares names"},
	{name: "hnp", why: "prun keeps no persistent virtual machine to attach to: each launch starts its own daemons"},
	{name: "report-events", why: "prun reports a run's events in one JSON file instead: --report FILE (docs/report.md)"},
	{name: "gpus-per-proc", why: "prun assigns no GPUs: set CUDA_VISIBLE_DEVICES (or ZE_AFFINITY_MASK) per rank, e.g. from PRUN_LOCAL_RANK in a wrapper script"},
}

// fallbackHostfile is the job's hostfile when no --hostfile gives one.
func (p *placeOpts) fallbackHostfile(env Env) string {
	if p.defaultHostfile != "" {
		return p.defaultHostfile
	}
	for _, v := range []string{"PRUN_HOSTFILE", "HYDRA_HOST_FILE"} {
		if f, _ := env.LookupEnv(v); f != "" {
			return f
		}
	}
	return ""
}

// checkPlacement rejects what can be judged without the allocation.
func checkPlacement(p *spelledPlacement) error {
	switch p.RM {
	case "", "user", "slurm", "pbs", "lsf": // hostfile.User, Slurm, PBS, LSF
	default:
		return usagef("-rmk %s: prun reads Slurm, PBS and LSF allocations: want slurm, pbs, lsf or user", p.RM)
	}
	if p.MaxNodes < 0 {
		return usagef("-max-vm-size %d: want a number of hosts", p.MaxNodes)
	}
	switch p.OrderNodes {
	case "", "ascending", "descending":
	default:
		return usagef("-order-nodes %s: want ASCENDING or DESCENDING", p.OrderNodes)
	}
	for _, d := range p.Display {
		switch d {
		case jobspec.DisplayMap, jobspec.DisplayMapJSON, jobspec.DisplayAllocation, jobspec.DisplayTopo, jobspec.DisplayRankMap:
		default:
			return usagef("--display %s: want map, map:json, allocation, topo or rank-map", d)
		}
	}
	for _, c := range p.Compat {
		if c[1] != "" && (c[1][0] == '-' || c[1] == "0") {
			return usagef("--%s %s: want a positive number", c[0], c[1])
		}
	}
	return nil
}
