package cli

import (
	"fmt"
	"strconv"
	"strings"

	"prun/jobspec"
	"prun/topology"
)

// compatCount reads the count of an old placement option: 1 to 2^20.
func compatCount(what, s string) (int, error) {
	if s == "" || len(s) > 8 || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("%s %s: want a positive number", what, strconv.Quote(s))
	}
	n, _ := strconv.Atoi(s)
	if n < 1 || n > 1<<20 {
		return 0, fmt.Errorf("%s %s: want a number from 1 to %d", what, strconv.Quote(s), 1<<20)
	}
	return n, nil
}

// conflictError is an older option that contradicts what the placement
// already says: opt is the option as given ("--npernode 3"), with the
// policy it contradicts ("--map-by ppr:2:node"), what its aspect of the
// placement: "map" (the mapping), "pe" (CPUs per process) or "bind" (the
// binding target). The CLI, which knows where that policy came from,
// names its source instead (resolve).
type conflictError struct{ opt, with, what string }

func (e *conflictError) Error() string { return e.opt + " conflicts with " + e.with }

// compatAspect is the aspect of the placement an older option sets, as
// conflictError's what; "" for the flags, which add to any policy.
func compatAspect(opt string) string {
	switch strings.TrimLeft(opt, "-") {
	case "npernode", "N", "npersocket", "ppn", "ppr", "pernode", "bynode", "byslot", "bycore", "bysocket":
		return "map"
	case "cpus-per-proc", "cpus-per-rank":
		return "pe"
	case "bind-to-core", "bind-to-socket", "bind-to-none":
		return "bind"
	}
	return ""
}

// compatSpelling is an older option with its value as a message names it.
func compatSpelling(opt, value string) string {
	s := spelling(opt)
	if value != "" {
		s += " " + value
	}
	return s
}

// ApplyCompat applies one of mpirun's older placement options to the
// parsed policies of pl: npernode N (also -N N), ppr N:RESOURCE, pernode, npersocket N, bynode,
// byslot, bycore, bysocket, oversubscribe, nooversubscribe, nolocal,
// use-hwthread-cpus, cpus-per-proc N (also cpus-per-rank), bind-to-core,
// bind-to-socket, bind-to-none and report-bindings. name may carry its
// leading dashes; value is "" for the options that take none. An option
// that contradicts a mapping, a binding or a PE=n already given is an
// error naming both (a *conflictError); one that says the same is
// harmless. Hydra's -ppn N (round after round) is not --map-by ppr:N:node
// (N per node at most). Call it after --map-by, --rank-by and --bind-to
// are applied.
func ApplyCompat(o *jobspec.Placement, name, value string) error {
	opt := strings.TrimLeft(name, "-")
	takes := map[string]bool{"npernode": true, "N": true, "npersocket": true, "cpus-per-proc": true, "cpus-per-rank": true,
		"ppr": true, "ppn": true}
	if takes[opt] != (value != "") {
		if value != "" {
			return fmt.Errorf("--%s takes no value", opt)
		}
		return fmt.Errorf("--%s needs a value", opt)
	}
	c := &compat{o: o, opt: opt, given: compatSpelling(opt, value)}
	switch opt {
	case "npernode", "N", "npersocket":
		n, err := compatCount("--"+opt, value)
		if err != nil {
			return err
		}
		obj := topology.Machine
		if opt == "npersocket" {
			obj = topology.Package
		}
		return c.setMap(jobspec.MapPolicy{By: jobspec.MapPPR, PPR: n, PPRObject: obj})
	case "ppn": // Hydra's: N per host, host after host, round after round
		n, err := compatCount("-ppn", value)
		if err != nil {
			return err
		}
		return c.setMap(jobspec.MapPolicy{By: jobspec.MapPPR, PPR: n, PPRObject: topology.Machine, Cycle: true})
	case "ppr": // Open MPI 4's --ppr N:RESOURCE
		p, err := jobspec.ParseMapBy("ppr:" + value)
		if err != nil || p.By != jobspec.MapPPR || strings.Count(value, ":") != 1 {
			return fmt.Errorf("--ppr %s: want N:RESOURCE (e.g. 2:package)", value)
		}
		return c.setMap(p)
	case "pernode":
		return c.setMap(jobspec.MapPolicy{By: jobspec.MapPPR, PPR: 1, PPRObject: topology.Machine})
	case "bynode":
		return c.setMap(jobspec.MapPolicy{By: jobspec.MapNode})
	case "byslot":
		return c.setMap(jobspec.MapPolicy{By: jobspec.MapSlot})
	case "bycore":
		return c.setMap(jobspec.MapPolicy{By: jobspec.MapCore})
	case "bysocket":
		return c.setMap(jobspec.MapPolicy{By: jobspec.MapPackage})
	case "hydra-hosts":
		// Hydra's host list (-hosts, -f): a job larger than the hosts'
		// slots goes round them again, each its slots per round, ranked
		// as placed; only under the default placement.
		if (o.MapBy.By == jobspec.MapDefault || o.MapBy.By == jobspec.MapSlot) && !o.MapBy.NoOversubscribe && !o.MapBy.Span {
			o.MapBy.Cycle, o.MapBy.Oversubscribe = true, true
		}
		return nil
	case "oversubscribe":
		return c.setFlag(&o.MapBy.Oversubscribe)
	case "nooversubscribe":
		return c.setFlag(&o.MapBy.NoOversubscribe)
	case "nolocal":
		return c.setFlag(&o.MapBy.NoLocal)
	case "use-hwthread-cpus":
		return c.setFlag(&o.MapBy.HWTCPUS)
	case "cpus-per-proc", "cpus-per-rank":
		return c.setPE(value)
	case "bind-to-core":
		return c.setBind(jobspec.BindCore)
	case "bind-to-socket":
		return c.setBind(jobspec.BindPackage)
	case "bind-to-none":
		return c.setBind(jobspec.BindNone)
	case "report-bindings":
		o.BindTo.Report = true
		return nil
	}
	return fmt.Errorf("unknown option %s", strconv.Quote("--"+opt))
}

// compat is one of ApplyCompat's options being applied to o: opt its name
// without dashes, given as the user wrote it, for conflicts.
type compat struct {
	o     *jobspec.Placement
	opt   string
	given string
}

// setMap sets the mapping policy p, unless another one is given.
func (c *compat) setMap(p jobspec.MapPolicy) error {
	o := c.o
	cur := o.MapBy
	if cur.By != jobspec.MapDefault && (cur.By != p.By || cur.PPR != p.PPR || cur.PPRObject != p.PPRObject || cur.Cycle != p.Cycle) {
		return &conflictError{c.given, "--map-by " + cur.String(), "map"}
	}
	cur.By, cur.PPR, cur.PPRObject, cur.Cycle = p.By, p.PPR, p.PPRObject, p.Cycle
	if err := cur.Check(); err != nil {
		return fmt.Errorf("--%s: %v", c.opt, err)
	}
	o.MapBy = cur
	return nil
}

// setBind sets the binding target t, unless another one is given.
func (c *compat) setBind(t jobspec.BindTarget) error {
	o := c.o
	if o.BindTo.To != jobspec.BindDefault && o.BindTo.To != t {
		return &conflictError{c.given, "--bind-to " + o.BindTo.To.String(), "bind"}
	}
	o.BindTo.To = t
	return nil
}

// setFlag sets one of the mapping's flags, if the mapping allows it.
func (c *compat) setFlag(flag *bool) error {
	*flag = true
	if err := c.o.MapBy.Check(); err != nil {
		*flag = false
		return fmt.Errorf("--%s: %v", c.opt, err)
	}
	return nil
}

// setPE sets cpus-per-proc's PE=n, unless another n is given.
func (c *compat) setPE(value string) error {
	o := c.o
	n, err := compatCount("--"+c.opt, value)
	if err != nil {
		return err
	}
	if o.MapBy.PE != 0 && o.MapBy.PE != n {
		return &conflictError{c.given, "PE=" + strconv.Itoa(o.MapBy.PE), "pe"}
	}
	o.MapBy.PE = n
	if err := o.MapBy.Check(); err != nil {
		o.MapBy.PE = 0
		return fmt.Errorf("--%s: %v", c.opt, err)
	}
	return nil
}
