package spawn

import "testing"

// downNode reads sinfo -N -o '%N|%T|%E' as Slurm 22.05 prints it.
func TestDownNode(t *testing.T) {
	for _, tc := range []struct{ in, desc, host string }{
		{"prun-s1|allocated|none\nprun-s2|down*|Not responding\nprun-s3|allocated|none\n", "prun-s2 down* (Not responding)", "prun-s2"},
		{"a|mixed|none\nb|allocated*|none\n", "b allocated*", "b"},
		{"a|fail|bad disk\n", "a fail (bad disk)", "a"},
		{"a|allocated|none\nb|completing|none\n", "", ""},
		{"", "", ""},
		{"garbage\n|\n", "", ""},
	} {
		desc, host := downNode(tc.in)
		if desc != tc.desc || host != tc.host {
			t.Errorf("downNode(%q) = %q, %q; want %q, %q", tc.in, desc, host, tc.desc, tc.host)
		}
	}
}

func FuzzDownNode(f *testing.F) {
	f.Add("prun-s2|down*|Not responding\n")
	f.Fuzz(func(t *testing.T, s string) {
		desc, host := downNode(s)
		if (desc == "") != (host == "") {
			t.Fatalf("downNode(%q) = %q, %q", s, desc, host)
		}
	})
}
