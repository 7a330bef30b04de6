package skills

import "sort"

// Statuses of a ReportEntry.
const (
	StatusServed  = "served"
	StatusPrivate = "private"
	StatusRefused = "refused"
)

// Report is the offline verdict on a skills folder, for the
// "skills check" command: what a server started on it would serve.
type Report struct {
	// Dir is the folder checked, as given.
	Dir string `json:"dir"`
	// Entries has one entry per skill folder (and per refused entry outside
	// any skill, such as a symbolic link), sorted by path.
	Entries []ReportEntry `json:"entries"`
	// Served, Private and Refused count the entries by status.
	Served  int `json:"served"`
	Private int `json:"private"`
	Refused int `json:"refused"`
}

// ReportEntry is the verdict on one skill folder.
type ReportEntry struct {
	// Path is the skill path (or the refused entry's path).
	Path string `json:"path"`
	// Status is StatusServed, StatusPrivate or StatusRefused.
	Status string `json:"status"`
	// URI is the SKILL.md URI of an accepted (served or private) skill.
	URI string `json:"uri,omitempty"`
	// Rule and Detail say why a refused skill is refused.
	Rule   string `json:"rule,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Files lists an accepted skill's files with digest and size, as
	// skills/list would publish them. A private skill's files are listed
	// for the operator but never served.
	Files []ResourceRef `json:"files,omitempty"`
}

// CheckReport loads dir exactly as Load does and reports, per skill folder,
// whether it would be served, is private, or is refused and why, with the
// digests of accepted skills. It logs nothing; the error is Load's.
func CheckReport(dir string) (*Report, error) {
	l, err := load(dir)
	if err != nil {
		return nil, err
	}
	rep := &Report{Dir: dir, Entries: []ReportEntry{}}
	for _, sk := range l.skills {
		e := ReportEntry{Path: sk.Path, Status: StatusServed, URI: sk.URI, Files: entryOf(sk).Resources}
		if sk.Metadata.Private {
			e.Status = StatusPrivate
			rep.Private++
		} else {
			rep.Served++
		}
		rep.Entries = append(rep.Entries, e)
	}
	for _, r := range l.refusals {
		rep.Entries = append(rep.Entries, ReportEntry{Path: r.Skill, Status: StatusRefused, Rule: r.Rule, Detail: r.Detail})
		rep.Refused++
	}
	sort.SliceStable(rep.Entries, func(i, j int) bool { return rep.Entries[i].Path < rep.Entries[j].Path })
	return rep, nil
}
