package cli

import (
	"strings"
)

// applyHydraEnv sets what Hydra's environment variables say, where the
// command line's own flags left it unset, as mpiexec.hydra reads them:
// HYDRA_LAUNCHER (or HYDRA_BOOTSTRAP) ssh, rsh or fork (Hydra's other
// launchers, slurm and the like, start its proxies; prun's daemons start
// over SSH whatever they say), HYDRA_IFACE, HYDRA_MAPPING, HYDRA_BINDING,
// HYDRA_MEMBIND, HYDRA_RMK, HYDRA_DEBUG and HYDRA_ENV=all. Containers running MPICH set
// HYDRA_LAUNCHER=fork, for one.
func applyHydraEnv(g *globalOpts, pl *spelledPlacement, env Env) {
	get := func(name string) string {
		v, _ := env.LookupEnv(name)
		return strings.TrimSpace(v)
	}
	if g.launcher == "" && g.launch.rsh == "" {
		for _, name := range []string{"HYDRA_LAUNCHER", "HYDRA_BOOTSTRAP"} {
			switch v := strings.ToLower(get(name)); v {
			case "ssh", "rsh", "fork":
				if g.launcher == "" {
					g.launcher = v
				}
			}
		}
	}
	if g.launch.ifInclude == "" {
		g.launch.ifInclude = get("HYDRA_IFACE")
	}
	mapsGiven, bindsGiven := policiesGiven(pl)
	for _, p := range []struct {
		flag, name string
		dst        *string
		given      bool
	}{
		{"map-by", "HYDRA_MAPPING", &pl.MapBy, mapsGiven},
		{"bind-to", "HYDRA_BINDING", &pl.BindTo, bindsGiven},
	} {
		if v := get(p.name); *p.dst == "" && !p.given && v != "" {
			*p.dst = v
			if pl.Origin == nil {
				pl.Origin = map[string]string{}
			}
			pl.Origin[p.flag] = p.name + "=" + v
		}
	}
	if pl.MemBind == "" {
		pl.MemBind = get("HYDRA_MEMBIND")
	}
	if pl.RM == "" {
		pl.RM = strings.ToLower(get("HYDRA_RMK"))
	}
	if v := get("HYDRA_DEBUG"); v != "" && v != "0" {
		g.verbose = true
	}
	if strings.EqualFold(get("HYDRA_ENV"), "all") && !g.genvNone {
		g.genvAll = true
	}
}
