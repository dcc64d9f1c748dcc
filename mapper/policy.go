package mapper

import "prun/hostfile"

// Options are the placement directives of a job.
type Options struct {
	MapBy   MapPolicy
	RankBy  RankPolicy
	BindTo  BindPolicy
	MemBind MemPolicy
	// Rankfile is the parsed rankfile of --map-by rankfile.
	Rankfile []hostfile.RankEntry
	// SeqHosts is the host of each rank for --map-by seq: the hostfile's
	// lines in order, repeats kept. Nil means every allocation host
	// repeated once per slot.
	SeqHosts []string
	// LocalHost is the launcher's node, which :NOLOCAL leaves out.
	LocalHost string
	// SlotsFromCores names the hosts whose slot count is their number of
	// cores (hostfile.Entry.SlotsFromCores); HWTCPUS counts their
	// hwthreads instead.
	SlotsFromCores map[string]bool
}
