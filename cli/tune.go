package cli

import (
	"fmt"
	"os"
	"strings"

	"prun/internal/shellwords"
)

// mpirun's -tune FILE[,FILE...] ("application profile options") names files
// of -x and --mca options for every process. prun exports both, the --mca
// ones as OMPI_MCA_KEY=VALUE (Open MPI 4.1's processes under prun do not
// apply them from the file, under mpirun they do), and names the files as
// mpirun does (OMPI_MCA_mca_base_envar_file_prefix).
// -am FILE[,FILE...] (aggregate MCA parameter sets, KEY=VALUE lines) is only
// passed on (OMPI_MCA_mca_base_param_file_prefix): Open MPI looks for a
// bare name in its own amca-param-sets directory, which prun cannot know.

// tuneEnv is what -tune list exports: the files, absolute, and their
// options' variables.
func tuneEnv(list string, env Env) ([]string, error) {
	given, files, err := fileList("-tune", list, env)
	if err != nil {
		return nil, err
	}
	var vars []string
	for i, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, usagef("-tune %s: %v", given[i], errText(err))
		}
		vs, err := parseTune(string(b), env)
		if err != nil {
			return nil, usagef("%s:%v", given[i], err)
		}
		vars = append(vars, vs...)
	}
	return append([]string{"OMPI_MCA_mca_base_envar_file_prefix=" + strings.Join(files, ",")}, vars...), nil
}

// parseTune returns the VAR=value of a tune file's -x options and the
// OMPI_MCA_KEY=VALUE of its --mca ones; errors start with "LINE: ". Words split as a shell splits them, # comments
// included.
func parseTune(text string, env Env) ([]string, error) {
	var vars []string
	for i, line := range strings.Split(text, "\n") {
		words, err := shellwords.Split(strings.TrimSuffix(line, "\r"))
		if err != nil {
			return nil, fmt.Errorf("%d: %v", i+1, err)
		}
		for j := 0; j < len(words); j++ {
			switch w := words[j]; w {
			case "-x":
				if j+1 == len(words) {
					return nil, fmt.Errorf("%d: -x needs a VAR or VAR=value", i+1)
				}
				kv, err := exportVar(words[j+1], env)
				if err != nil {
					return nil, fmt.Errorf("%d: %v", i+1, err)
				}
				if kv != "" {
					vars = append(vars, kv)
				}
				j++
			case "-mca", "--mca", "-gmca", "--gmca":
				if j+2 >= len(words) {
					return nil, fmt.Errorf("%d: %s needs a KEY and a VALUE", i+1, w)
				}
				if !isParamName(words[j+1]) {
					return nil, fmt.Errorf("%d: %q is not a parameter name", i+1, words[j+1])
				}
				vars = append(vars, "OMPI_MCA_"+words[j+1]+"="+words[j+2])
				j += 2
			default:
				return nil, fmt.Errorf("%d: %q: a tune file holds -x and --mca options only", i+1, w)
			}
		}
	}
	return vars, nil
}
