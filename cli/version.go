package cli

import (
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"prun/pmixsrv"
)

// Version is prun's release.
const Version = "0.1.0"

// versionText is what --version prints: prun's release and the commit it
// was built from, then the servers it hosts for the ranks, as mpirun's and
// srun's --version name theirs. What a bug report needs to say which prun
// and which PMIx served the job.
func versionText() string {
	info, _ := debug.ReadBuildInfo()
	var b strings.Builder
	fmt.Fprintf(&b, "prun %s (%s)\n", Version, commit(info))
	// The clients: Debian 12's Open MPI 4.1 (PMIx 4.2) and Debian 13's
	// Open MPI 5.0 (PMIx 5.0), whose group-construct replies the 4.2.2
	// server packs in their own layout only with openpmix/patches/0001.
	fmt.Fprintf(&b, "PMIx server: OpenPMIx %s with prun's patches, built from Debian's %s; "+
		"serves PMIx 4.x and 5.x clients (Open MPI 4.1, 5.0)\n", pmixsrv.PinRelease, pmixsrv.PinSource)
	fmt.Fprintf(&b, "  patches: %s\n", strings.Join(strings.Fields(pmixsrv.PinPatches), ", "))
	b.WriteString("PMI: PMI-1 and PMI-2 servers for MPICH-family clients\n")
	return b.String()
}

// The VCS stamp of a build that Go cannot stamp, given by the linker as Go's
// would be (-X prun/cli.vcsRevision=HASH, vcsTime=RFC 3339, vcsModified=true
// or false): release/build.sh's, whose sources are bound into a Debian 11
// root without their .git. Go's own stamp wins where there is one.
var vcsRevision, vcsTime, vcsModified string

// commit says which commit a build is of, from the VCS stamp go build
// leaves in the binary: "commit 200eb34, 2026-11-29", with "-dirty" after
// the hash when the tree had uncommitted changes (git describe's mark).
// A build without a stamp says "unknown commit": from a tarball, with
// -buildvcs=false, or in a linked git worktree (Go looks for a .git
// directory, and a worktree's is a file: golang.org/issue/58218), unless
// the linker gave one (vcsRevision).
func commit(info *debug.BuildInfo) string {
	var rev, when string
	dirty := false
	if info != nil {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if rev == "" {
		rev, when, dirty = vcsRevision, vcsTime, vcsModified == "true"
	}
	if rev == "" {
		return "unknown commit"
	}
	s := "commit " + rev[:min(len(rev), 7)]
	if dirty {
		s += "-dirty"
	}
	if t, err := time.Parse(time.RFC3339, when); err == nil {
		s += ", " + t.UTC().Format(time.DateOnly)
	}
	return s
}
