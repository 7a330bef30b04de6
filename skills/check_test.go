package skills

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCheckReportFixture(t *testing.T) {
	rep, err := CheckReport(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"acme/billing/refunds": StatusServed,
		"git-workflow":         StatusServed,
		"internal-notes":       StatusPrivate,
		"intranet-dashboard":   StatusRefused,
		"leaky":                StatusRefused,
		"misnamed":             StatusRefused,
		"oversized":            StatusRefused,
		"tool-hungry":          StatusRefused,
	}
	if len(rep.Entries) != len(want) || rep.Served != 2 || rep.Private != 1 || rep.Refused != 5 {
		t.Fatalf("report counts %d/%d/%d over %d entries: %+v", rep.Served, rep.Private, rep.Refused, len(rep.Entries), rep.Entries)
	}
	for i, e := range rep.Entries {
		if i > 0 && rep.Entries[i-1].Path >= e.Path {
			t.Errorf("entries not sorted by path at %s", e.Path)
		}
		if want[e.Path] != e.Status {
			t.Errorf("%s: status %s, want %s", e.Path, e.Status, want[e.Path])
		}
		switch e.Status {
		case StatusRefused:
			if e.Rule == "" || e.Detail == "" || len(e.Files) != 0 {
				t.Errorf("%s: refused entry %+v", e.Path, e)
			}
		default:
			if e.URI != "skill://"+e.Path+"/SKILL.md" || len(e.Files) == 0 {
				t.Errorf("%s: accepted entry %+v", e.Path, e)
			}
			for _, f := range e.Files {
				data, err := os.ReadFile(filepath.Join(fixtureDir, filepath.FromSlash(f.URI[len("skill://"):])))
				if err != nil {
					t.Fatal(err)
				}
				if f.Digest != sha256Digest(data) || f.Size != int64(len(data)) {
					t.Errorf("%s: digest/size mismatch", f.URI)
				}
			}
		}
	}
}

func TestCheckReportMissingDir(t *testing.T) {
	if _, err := CheckReport(filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Fatal("no error for a missing folder")
	}
}
