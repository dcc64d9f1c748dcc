package daemon

import (
	"strings"
	"testing"
)

// TestTuningPML: on a node without a fabric device, the PMLs Open MPI cannot
// select there are excluded, unless the user chose a PML or tunes ucx's.
func TestTuningPML(t *testing.T) {
	for _, c := range []struct {
		base []string
		want string // "" for none
	}{
		{nil, "OMPI_MCA_pml=^ucx,cm"},
		{[]string{"OMPI_MCA_pml=ob1"}, ""},
		{[]string{"OMPI_MCA_pml_ucx_tls=any"}, "OMPI_MCA_pml=^cm"},
	} {
		want := c.want
		if nodeHasFabric() {
			want = ""
		}
		var got string
		for _, kv := range tuningEnv(c.base, "", nil) {
			if strings.HasPrefix(kv, "OMPI_MCA_pml=") {
				got = kv
			}
		}
		if got != want {
			t.Errorf("base %v: %q, want %q", c.base, got, want)
		}
	}
}
