package launcher

import (
	"encoding/json"
	"reflect"
	"testing"

	"prun/daemon"
	"prun/dvm"
	"prun/jobspec"
)

// A runtime takes a job as submitters send it now (Spec) and as they did
// before (a Plan carrying it), user strings byte for byte either way.
func TestSubmittedJob(t *testing.T) {
	job := &jobspec.Job{CmdLine: "prun -n 2 ./a\xff", Apps: []jobspec.App{
		{Argv: []string{"./a\xff", "x"}, NP: 2, Env: []string{"K=v\xfe"}, Wdir: "/tmp/w\xfd"}}}
	spec, err := daemon.MarshalJob(job)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := json.Marshal(daemon.Plan{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []dvm.Request{{Op: "submit", Spec: spec}, {Op: "submit", Plan: plan}} {
		got, err := submittedJob(req)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, job) {
			t.Errorf("submittedJob = %+v, want %+v", got, job)
		}
	}
	if _, err := submittedJob(dvm.Request{Op: "submit", Spec: json.RawMessage(`{"Apps":`)}); err == nil {
		t.Error("a cut job: no error")
	}
}
