package topology

import "testing"

func TestLocality(t *testing.T) {
	top, err := ParseSynthetic("pack:2 l3:1 l2:2 core:2 pu:2")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cpus CPUSet
		want string
	}{
		// hwloc gives a synthetic machine one NUMA node when none is listed.
		{CPUSet{0}, "SK0:L30:L20:CR0:HT0:NM0"},
		{CPUSet{1}, "SK0:L30:L20:CR0:HT1:NM0"},
		{CPUSet{2, 3}, "SK0:L30:L20:CR1:HT2-3:NM0"},
		{CPUSet{8}, "SK1:L31:L22:CR4:HT8:NM0"},
		{nil, "SK0-1:L30-1:L20-3:CR0-7:HT0-15:NM0"},
	} {
		if got := top.Locality(tc.cpus); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.cpus, got, tc.want)
		}
	}
	numa, _ := ParseSynthetic("pack:1 numa:2 core:2 pu:1")
	if got := numa.Locality(CPUSet{3}); got != "SK0:CR3:HT3:NM1" {
		t.Errorf("numa: %s, want SK0:CR3:HT3:NM1", got)
	}
}
