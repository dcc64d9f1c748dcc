package cli

import (
	"fmt"
	"strings"

	"prun/jobspec"
)

// parseOutput sets o from an --output value: a comma-separated list of
// tag, tag-detailed, rank, timestamp, merge-stderr-to-stdout, json, xml,
// ordered, dir=DIR and file=PREFIX. As with mpirun, the files get a copy
// of the output and the terminal keeps it (Tee) unless every dir and file
// says :nocopy. It sets only what the value names, so that the older
// spellings add to it.
func parseOutput(spec string, o *jobspec.Output) error {
	files, copies := false, false
	for _, item := range strings.Split(spec, ",") {
		name, val, hasVal := strings.Cut(strings.TrimSpace(item), "=")
		switch name {
		case "tag":
			o.Tag = true
		case "tag-detailed":
			o.TagDetailed = true
		case "rank":
			o.Rank = true
		case "timestamp":
			o.Timestamp = true
		case "merge-stderr-to-stdout":
			o.MergeStderr = true
		case "json":
			o.JSON = true
		case "xml":
			o.XML = true
		case "ordered":
			o.Ordered = true
		case "dir", "file":
			const q = ":nocopy" // Open MPI: case-insensitive
			nocopy := len(val) >= len(q) && strings.EqualFold(val[len(val)-len(q):], q)
			if nocopy {
				val = val[:len(val)-len(q)]
			}
			files, copies = true, copies || !nocopy
			if !hasVal || val == "" {
				return fmt.Errorf("--output %s needs a value: %s=PATH", name, name)
			}
			if name == "dir" {
				o.Dir = val
			} else {
				o.File = val
			}
			continue
		case "":
			continue
		default:
			return fmt.Errorf("--output: unknown form %q (tag, tag-detailed, rank, timestamp, merge-stderr-to-stdout, json, xml, ordered, dir=DIR, file=PREFIX)", item)
		}
		if hasVal {
			return fmt.Errorf("--output %s takes no value", name)
		}
	}
	if files {
		o.Tee = copies
	}
	if o.JSON && o.XML {
		return fmt.Errorf("--output json and xml: give one")
	}
	return nil
}
