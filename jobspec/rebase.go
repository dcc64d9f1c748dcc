package jobspec

import "path/filepath"

// Rebase makes the job's relative file names absolute from dir, the
// working directory of the command line that gave them: a job run by a
// process whose own working directory is another (a persistent runtime)
// then reads and writes the files its submitter named. Programs and
// working directories are absolute already (App.Exe, App.Wdir); "-" and
// "+" (stdout, stderr) are not files.
func (j *Job) Rebase(dir string) {
	names := []*string{&j.Place.Hostfile, &j.Place.Rankfile, &j.Place.MapBy.File,
		&j.Output.Dir, &j.Output.File, &j.OutfilePattern, &j.ErrfilePattern,
		&j.Report, &j.ReportPID, &j.ReportURI, &j.OutputProctable}
	for i := range j.Apps {
		names = append(names, &j.Apps[i].Hostfile)
	}
	for _, p := range names {
		if *p != "" && *p != "-" && *p != "+" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}
