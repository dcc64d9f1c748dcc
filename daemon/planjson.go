package daemon

import (
	"encoding/json"

	"prun/internal/jsonbytes"
	"prun/jobspec"
)

// Plans and spawn requests cross the control plane as JSON, whose strings
// are UTF-8: the strings that are the user's bytes (arguments, environment,
// program and directory paths, the command line, the names of the files
// sent) travel as jsonbytes, so that a byte that is not UTF-8 arrives as
// it left instead of as U+FFFD. The wire types below embed the plain ones
// and shadow those fields (encoding/json takes the shallower field), so a
// field added to a plain type travels as before.

type (
	planAlias  Plan
	jobAlias   jobspec.Job
	appAlias   jobspec.App
	fileAlias  File
	spawnAlias SpawnApp
)

type wirePlan struct {
	planAlias
	Job       *wireJob
	ParentKVS jsonbytes.String
	Preput    jsonbytes.Pairs
	Programs  []wireFile `json:",omitempty"`
	Files     []wireFile `json:",omitempty"`
}

type wireJob struct {
	jobAlias
	Apps         []wireApp
	CmdLine      jsonbytes.String
	PreloadFiles jsonbytes.Strings
}

type wireApp struct {
	appAlias
	Argv                  jsonbytes.Strings
	Exe                   jsonbytes.String
	Env                   jsonbytes.Strings
	Wdir, Hosts, Hostfile jsonbytes.String
	Pset                  jsonbytes.String
}

type wireFile struct {
	fileAlias
	Name jsonbytes.String
}

// MarshalJSON writes the plan with the user's strings byte for byte.
func (p Plan) MarshalJSON() ([]byte, error) {
	w := wirePlan{planAlias: planAlias(p), ParentKVS: jsonbytes.String(p.ParentKVS), Preput: p.Preput,
		Programs: wireFiles(p.Programs), Files: wireFiles(p.Files)}
	if p.Job != nil {
		w.Job = toWireJob(p.Job)
	}
	return json.Marshal(w)
}

func toWireJob(job *jobspec.Job) *wireJob {
	j := &wireJob{jobAlias: jobAlias(*job), CmdLine: jsonbytes.String(job.CmdLine), PreloadFiles: job.PreloadFiles}
	if job.Apps != nil {
		j.Apps = make([]wireApp, len(job.Apps))
		for i, a := range job.Apps {
			j.Apps[i] = wireApp{appAlias: appAlias(a), Argv: a.Argv, Exe: jsonbytes.String(a.Exe), Env: a.Env,
				Wdir: jsonbytes.String(a.Wdir), Hosts: jsonbytes.String(a.Hosts), Hostfile: jsonbytes.String(a.Hostfile),
				Pset: jsonbytes.String(a.Pset)}
		}
	}
	return j
}

func (w *wireJob) plain() *jobspec.Job {
	j := jobspec.Job(w.jobAlias)
	j.CmdLine, j.PreloadFiles = string(w.CmdLine), w.PreloadFiles
	j.Apps = nil
	if w.Apps != nil {
		j.Apps = make([]jobspec.App, len(w.Apps))
		for i, a := range w.Apps {
			app := jobspec.App(a.appAlias)
			app.Argv, app.Exe, app.Env, app.Wdir = a.Argv, string(a.Exe), a.Env, string(a.Wdir)
			app.Hosts, app.Hostfile, app.Pset = string(a.Hosts), string(a.Hostfile), string(a.Pset)
			j.Apps[i] = app
		}
	}
	return &j
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (p *Plan) UnmarshalJSON(b []byte) error {
	var w wirePlan
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*p = Plan(w.planAlias)
	p.ParentKVS, p.Preput = string(w.ParentKVS), w.Preput
	p.Programs, p.Files = plainFiles(w.Programs), plainFiles(w.Files)
	p.Job = nil
	if w.Job != nil {
		p.Job = w.Job.plain()
	}
	return nil
}

func wireFiles(fs []File) []wireFile {
	if fs == nil {
		return nil
	}
	w := make([]wireFile, len(fs))
	for i, f := range fs {
		w[i] = wireFile{fileAlias: fileAlias(f), Name: jsonbytes.String(f.Name)}
	}
	return w
}

func plainFiles(w []wireFile) []File {
	if w == nil {
		return nil
	}
	fs := make([]File, len(w))
	for i, f := range w {
		fs[i] = File(f.fileAlias)
		fs[i].Name = string(f.Name)
	}
	return fs
}

type wireSpawn struct {
	spawnAlias
	Cmd                        jsonbytes.String
	Argv, Env                  jsonbytes.Strings
	Cwd, Hosts, Hostfile, Path jsonbytes.String
}

// MarshalJSON writes a spawned app with its strings byte for byte.
func (a SpawnApp) MarshalJSON() ([]byte, error) {
	return json.Marshal(wireSpawn{spawnAlias: spawnAlias(a), Cmd: jsonbytes.String(a.Cmd), Argv: a.Argv, Env: a.Env,
		Cwd: jsonbytes.String(a.Cwd), Hosts: jsonbytes.String(a.Hosts), Hostfile: jsonbytes.String(a.Hostfile),
		Path: jsonbytes.String(a.Path)})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (a *SpawnApp) UnmarshalJSON(b []byte) error {
	var w wireSpawn
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*a = SpawnApp(w.spawnAlias)
	a.Cmd, a.Argv, a.Env, a.Cwd = string(w.Cmd), w.Argv, w.Env, string(w.Cwd)
	a.Hosts, a.Hostfile, a.Path = string(w.Hosts), string(w.Hostfile), string(w.Path)
	return nil
}

type eventAlias Event

// wireEvent carries Msg (a rank's abort message, a help text) byte for byte.
type wireEvent struct {
	eventAlias
	Msg jsonbytes.String
}

// MarshalJSON writes the event with its message byte for byte.
func (e Event) MarshalJSON() ([]byte, error) {
	return json.Marshal(wireEvent{eventAlias: eventAlias(e), Msg: jsonbytes.String(e.Msg)})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (e *Event) UnmarshalJSON(b []byte) error {
	var w wireEvent
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = Event(w.eventAlias)
	e.Msg = string(w.Msg)
	return nil
}
