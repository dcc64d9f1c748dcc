package cli

import (
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// The commit comes from Go's VCS stamp, and its absence is said.
func TestCommit(t *testing.T) {
	stamp := func(kv ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{}
		for i := 0; i < len(kv); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return info
	}
	const rev = "200eb34f16dc80dea88f030820de338bb9342f39"
	for i, tc := range []struct {
		info *debug.BuildInfo
		want string
	}{
		{stamp("vcs", "git", "vcs.revision", rev, "vcs.time", "2026-11-29T06:12:00Z", "vcs.modified", "false"),
			"commit 200eb34, 2026-11-29"},
		{stamp("vcs.revision", rev, "vcs.time", "2026-11-29T23:30:00-02:00", "vcs.modified", "true"),
			"commit 200eb34-dirty, 2026-11-30"}, // the date in UTC
		{stamp("vcs.revision", rev), "commit 200eb34"},
		{stamp("vcs.revision", "abc"), "commit abc"},
		{stamp("-buildmode", "exe", "CGO_ENABLED", "1"), "unknown commit"}, // a tarball's, -buildvcs=false, a worktree's
		{stamp(), "unknown commit"},
		{nil, "unknown commit"}, // no build information at all
	} {
		if got := commit(tc.info); got != tc.want {
			t.Errorf("case %d: commit = %q, want %q", i, got, tc.want)
		}
	}

	// Without Go's stamp, the linker's (release/build.sh's -X); Go's wins.
	vcsRevision, vcsTime, vcsModified = rev, "2026-11-29T06:12:00Z", "true"
	t.Cleanup(func() { vcsRevision, vcsTime, vcsModified = "", "", "" })
	if got, want := commit(stamp("-buildvcs", "false")), "commit 200eb34-dirty, 2026-11-29"; got != want {
		t.Errorf("the linker's stamp: commit = %q, want %q", got, want)
	}
	if got, want := commit(stamp("vcs.revision", "abc")), "commit abc"; got != want {
		t.Errorf("Go's stamp and the linker's: commit = %q, want %q (Go's)", got, want)
	}
}

// --version names prun's release and commit, then the PMIx server prun
// hosts (the pinned OpenPMIx, its patches, the clients it serves) and the
// PMI servers, one line each.
func TestVersionText(t *testing.T) {
	env, _ := testEnv(t)
	req, err := Parse([]string{"--version"}, env)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	if !req.answered(&stdout, &stderr) || stderr.Len() > 0 {
		t.Fatalf("--version not answered: stderr %q", stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	want := []string{
		`^prun ` + regexp.QuoteMeta(Version) + ` \((commit [0-9a-f]{7}(-dirty)?(, \d{4}-\d\d-\d\d)?|unknown commit)\)$`,
		`^PMIx server: OpenPMIx 4\.2\.2 with prun's patches, built from Debian's pmix 4\.2\.2-\S+ \(\w+\); serves PMIx 4\.x and 5\.x clients \(Open MPI 4\.1, 5\.0\)$`,
		`^  patches: 0001-group-construct-reply-by-client-version, 0002-\S+(, \S+)*$`,
		`^PMI: PMI-1 and PMI-2 servers for MPICH-family clients$`,
	}
	if len(lines) != len(want) {
		t.Fatalf("--version printed %d lines, want %d:\n%s", len(lines), len(want), stdout.String())
	}
	for i, re := range want {
		if !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("--version line %d: %q does not match %s", i+1, lines[i], re)
		}
	}
}
