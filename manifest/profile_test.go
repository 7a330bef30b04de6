package manifest

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

var sevenTools = []string{
	"graph_task_cancel", "graph_task_claim", "graph_task_complete", "graph_task_create",
	"graph_task_fail", "graph_task_heartbeat", "graph_task_inspect",
}

func TestToolsAndOperations(t *testing.T) {
	if !slices.Equal(AllTools, sevenTools) {
		t.Fatalf("AllTools = %v, want %v", AllTools, sevenTools)
	}
	want := map[string]string{
		ToolCreate: "create", ToolInspect: "inspect", ToolClaim: "claim", ToolHeartbeat: "heartbeat",
		ToolComplete: "complete", ToolFail: "fail", ToolCancel: "cancel",
	}
	if len(want) != 7 {
		t.Fatalf("tool constants are not seven distinct names")
	}
	for tool, verb := range want {
		if got := Operation(tool); got != verb {
			t.Errorf("Operation(%q) = %q, want %q", tool, got, verb)
		}
	}
	for _, unknown := range []string{"", "graph_task_requeue", "GRAPH_TASK_CLAIM", "create"} {
		if got := Operation(unknown); got != "" {
			t.Errorf("Operation(%q) = %q, want empty", unknown, got)
		}
	}
}

func TestProtocolsAndIdentifiers(t *testing.T) {
	wantLegacy := []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}
	if !slices.Equal(LegacyVersions, wantLegacy) {
		t.Errorf("LegacyVersions = %v", LegacyVersions)
	}
	if ModernVersion != "2026-07-28" {
		t.Errorf("ModernVersion = %q", ModernVersion)
	}
	if want := append(slices.Clone(wantLegacy), "2026-07-28"); !slices.Equal(Protocols, want) {
		t.Errorf("Protocols = %v, want %v", Protocols, want)
	}
	if !slices.IsSorted(Protocols) {
		t.Errorf("Protocols not ascending: %v", Protocols)
	}
	if ManifestURI != "graph-engineering://capabilities/manifest" ||
		TasksExtension != "io.modelcontextprotocol/tasks" ||
		SkillsExtension != "io.modelcontextprotocol/skills" {
		t.Errorf("identifiers changed: %q %q %q", ManifestURI, TasksExtension, SkillsExtension)
	}
}

// Writing to the exported slices must not change what the package does.
func TestExportedSlicesAreNotTrusted(t *testing.T) {
	saved := AllTools[0]
	AllTools[0] = "graph_task_evil"
	defer func() { AllTools[0] = saved }()
	if got := DefaultProfile().AllowedTools; !slices.Equal(got, sevenTools) {
		t.Errorf("DefaultProfile tools follow a modified AllTools: %v", got)
	}
	if _, err := ParseProfile([]byte(`{"allowed_tools":["graph_task_evil"]}`)); !errors.Is(err, ErrInvalidProfile) {
		t.Errorf("a name written into AllTools became a tool: %v", err)
	}
}

func TestParseProfileAbsentKeysDoNotNarrow(t *testing.T) {
	for _, in := range []string{`{}`, " { } \n"} {
		p, err := ParseProfile([]byte(in))
		if err != nil {
			t.Fatalf("ParseProfile(%q): %v", in, err)
		}
		if !reflect.DeepEqual(p, DefaultProfile()) {
			t.Errorf("ParseProfile(%q) = %+v, want the default %+v", in, p, DefaultProfile())
		}
	}
}

func TestParseProfileNarrows(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want Profile
	}{
		{
			name: "tools only, in any order; tasks extension lost with create and inspect",
			in:   `{"allowed_tools":["graph_task_heartbeat","graph_task_claim"]}`,
			want: Profile{AllowedTools: []string{ToolClaim, ToolHeartbeat}, Resources: true, TasksExtension: false, Skills: true},
		},
		{
			name: "dropping inspect alone turns the tasks extension off",
			in:   `{"allowed_tools":["graph_task_create","graph_task_claim"]}`,
			want: Profile{AllowedTools: []string{ToolClaim, ToolCreate}, Resources: true, TasksExtension: false, Skills: true},
		},
		{
			name: "dropping create alone turns the tasks extension off",
			in:   `{"allowed_tools":["graph_task_inspect"]}`,
			want: Profile{AllowedTools: []string{ToolInspect}, Resources: true, TasksExtension: false, Skills: true},
		},
		{
			name: "create and inspect kept: tasks extension stays",
			in:   `{"allowed_tools":["graph_task_inspect","graph_task_create"]}`,
			want: Profile{AllowedTools: []string{ToolCreate, ToolInspect}, Resources: true, TasksExtension: true, Skills: true},
		},
		{
			name: "no tools at all",
			in:   `{"allowed_tools":[]}`,
			want: Profile{AllowedTools: []string{}, Resources: true, TasksExtension: false, Skills: true},
		},
		{
			name: "resources off takes skills with it",
			in:   `{"resources":false}`,
			want: Profile{AllowedTools: sevenTools, Resources: false, TasksExtension: true, Skills: false},
		},
		{
			name: "switches off explicitly",
			in:   `{"tasks_extension":false,"skills":false}`,
			want: Profile{AllowedTools: sevenTools, Resources: true, TasksExtension: false, Skills: false},
		},
		{
			name: "explicit true is the default",
			in:   `{"resources":true,"tasks_extension":true,"skills":true}`,
			want: DefaultProfile(),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseProfile([]byte(tc.in))
			if err != nil {
				t.Fatalf("ParseProfile(%s): %v", tc.in, err)
			}
			if !reflect.DeepEqual(p, tc.want) {
				t.Errorf("ParseProfile(%s) = %+v, want %+v", tc.in, p, tc.want)
			}
		})
	}
}

func TestParseProfileRejects(t *testing.T) {
	allowedKeys := "allowed_tools, resources, skills, tasks_extension"
	cases := []struct {
		name     string
		in       string
		wantMsgs []string
	}{
		{"unknown key", `{"tools":[]}`, []string{`unknown key "tools"`, allowedKeys}},
		{"unknown key beside known", `{"resources":true,"admin":true}`, []string{`"admin"`, allowedKeys}},
		{"unknown tool", `{"allowed_tools":["graph_task_claim","graph_task_requeue"]}`,
			append([]string{`allowed_tools[1]`, `unknown tool "graph_task_requeue"`}, sevenTools...)},
		{"tool names are case-sensitive", `{"allowed_tools":["Graph_Task_Claim"]}`, []string{`"Graph_Task_Claim"`}},
		{"duplicate tool", `{"allowed_tools":["graph_task_claim","graph_task_fail","graph_task_claim"]}`,
			[]string{`allowed_tools lists "graph_task_claim" twice`}},
		{"resources as string", `{"resources":"yes"}`, []string{"resources must be a boolean (got string)"}},
		{"skills null", `{"skills":null}`, []string{"skills must be a boolean (got null)"}},
		{"tasks_extension number", `{"tasks_extension":1}`, []string{"tasks_extension must be a boolean (got number)"}},
		{"allowed_tools as string", `{"allowed_tools":"graph_task_claim"}`, []string{"allowed_tools must be an array", "(got string)"}},
		{"allowed_tools null", `{"allowed_tools":null}`, []string{"allowed_tools must be an array", "(got null)"}},
		{"allowed_tools element not string", `{"allowed_tools":["graph_task_claim",7]}`, []string{"allowed_tools[1] must be a string (got number)"}},
		{"duplicate key", `{"resources":true,"resources":false}`, []string{`member name "resources" twice`}},
		{"not an object", `["graph_task_claim"]`, []string{"must be a JSON object (got array)"}},
		{"malformed", `{"resources":true`, []string{"invalid JSON"}},
		{"empty", ``, []string{"empty input"}},
		{"tasks extension contradicted by tools", `{"allowed_tools":["graph_task_create"],"tasks_extension":true}`,
			[]string{"tasks_extension is true", "graph_task_inspect"}},
		{"skills contradicted by resources", `{"resources":false,"skills":true}`, []string{"skills is true but resources is false"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParseProfile([]byte(tc.in))
			if !errors.Is(err, ErrInvalidProfile) {
				t.Fatalf("ParseProfile(%s) = %+v, %v; want an error matching ErrInvalidProfile", tc.in, p, err)
			}
			for _, m := range tc.wantMsgs {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}
	// Malformed JSON also matches the JSON sentinel.
	if _, err := ParseProfile([]byte(`{`)); !errors.Is(err, ErrInvalidJSON) {
		t.Errorf("malformed profile error %v does not match ErrInvalidJSON", err)
	}
}

func TestProfileEffective(t *testing.T) {
	zero := Profile{}.Effective()
	if zero.AllowedTools == nil || len(zero.AllowedTools) != 0 || zero.Resources || zero.TasksExtension || zero.Skills {
		t.Errorf("zero Profile effective = %+v, want nothing allowed (tools non-nil)", zero)
	}
	if b, _ := json.Marshal(zero); string(b) != `{"allowed_tools":[],"resources":false,"tasks_extension":false,"skills":false}` {
		t.Errorf("zero Profile effective marshals as %s", b)
	}

	in := Profile{
		AllowedTools:   []string{ToolInspect, "graph_task_requeue", ToolCreate, ToolInspect},
		Resources:      false,
		TasksExtension: true,
		Skills:         true,
	}
	e := in.Effective()
	want := Profile{AllowedTools: []string{ToolCreate, ToolInspect}, Resources: false, TasksExtension: true, Skills: false}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("Effective() = %+v, want %+v", e, want)
	}
	if !reflect.DeepEqual(e.Effective(), e) {
		t.Errorf("Effective is not idempotent: %+v -> %+v", e, e.Effective())
	}
	if in.AllowedTools[1] != "graph_task_requeue" {
		t.Errorf("Effective modified its receiver: %v", in.AllowedTools)
	}
	if got := DefaultProfile().Effective(); !reflect.DeepEqual(got, DefaultProfile()) {
		t.Errorf("DefaultProfile is not in Effective form: %+v", got)
	}
}

func writeFile(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "profile.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadProfile(t *testing.T) {
	p, err := LoadProfile(writeFile(t, []byte(`{"allowed_tools":["graph_task_claim"],"skills":false}`+"\n")))
	if err != nil {
		t.Fatal(err)
	}
	want := Profile{AllowedTools: []string{ToolClaim}, Resources: true, TasksExtension: false, Skills: false}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("LoadProfile = %+v, want %+v", p, want)
	}

	// Exactly at the bound: accepted.
	body := []byte(`{"resources":false}`)
	atLimit := append(slices.Clone(body), []byte(strings.Repeat(" ", MaxProfileBytes-len(body)))...)
	if _, err := LoadProfile(writeFile(t, atLimit)); err != nil {
		t.Errorf("profile of exactly %d bytes rejected: %v", MaxProfileBytes, err)
	}
	// One byte over (still valid JSON): refused for its size.
	path := writeFile(t, append(atLimit, ' '))
	_, err = LoadProfile(path)
	if !errors.Is(err, ErrInvalidProfile) || !strings.Contains(err.Error(), "larger than 65536 bytes") || !strings.Contains(err.Error(), path) {
		t.Errorf("oversized profile error = %v, want ErrInvalidProfile naming the path and the bound", err)
	}

	// Parse errors name the file.
	path = writeFile(t, []byte(`{"bogus":1}`))
	if _, err := LoadProfile(path); !errors.Is(err, ErrInvalidProfile) || !strings.Contains(err.Error(), path) {
		t.Errorf("invalid profile error = %v, want ErrInvalidProfile naming the path", err)
	}

	// A missing file is an I/O error, not an invalid profile.
	missing := filepath.Join(t.TempDir(), "absent.json")
	_, err = LoadProfile(missing)
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrInvalidProfile) {
		t.Errorf("missing profile error = %v, want fs.ErrNotExist only", err)
	}
}

func TestNewSurface(t *testing.T) {
	narrow := Profile{AllowedTools: []string{ToolClaim, ToolComplete}, Resources: true, TasksExtension: true, Skills: true}
	noResources := DefaultProfile()
	noResources.Resources = false
	cases := []struct {
		name string
		opts Options
		want Surface
	}{
		{
			name: "default, no skills",
			opts: Options{},
			want: Surface{Tools: sevenTools, Resources: true, TasksExtension: true, SkillURIs: []string{}, UIExtension: true},
		},
		{
			name: "flag disables the tasks extension",
			opts: Options{DisableTasksExtension: true},
			want: Surface{Tools: sevenTools, Resources: true, SkillURIs: []string{}, UIExtension: true},
		},
		{
			name: "profile without create and inspect: no tasks extension",
			opts: Options{Profile: &narrow},
			want: Surface{Tools: []string{ToolClaim, ToolComplete}, Resources: true, SkillURIs: []string{}},
		},
		{
			name: "skills loaded: URIs sorted and deduplicated",
			opts: Options{SkillsLoaded: true, SkillURIs: []string{"skill://b", "skill://a", "skill://b"}},
			want: Surface{Tools: sevenTools, Resources: true, TasksExtension: true, SkillsExtension: true,
				SkillURIs: []string{"skill://a", "skill://b"}, UIExtension: true},
		},
		{
			name: "skills need resources",
			opts: Options{Profile: &noResources, SkillsLoaded: true, SkillURIs: []string{"skill://a"}},
			want: Surface{Tools: sevenTools, Resources: false, TasksExtension: true, SkillURIs: []string{}},
		},
		{
			name: "skills need a loaded directory",
			opts: Options{SkillsLoaded: false, SkillURIs: []string{"skill://a"}},
			want: Surface{Tools: sevenTools, Resources: true, TasksExtension: true, SkillURIs: []string{}, UIExtension: true},
		},
		{
			name: "profile can switch skills off",
			opts: Options{Profile: &Profile{AllowedTools: sevenTools, Resources: true, TasksExtension: true}, SkillsLoaded: true, SkillURIs: []string{"skill://a"}},
			want: Surface{Tools: sevenTools, Resources: true, TasksExtension: true, SkillURIs: []string{}, UIExtension: true},
		},
		{
			name: "zero profile allows nothing",
			opts: Options{Profile: &Profile{}, SkillsLoaded: true, SkillURIs: []string{"skill://a"}},
			want: Surface{Tools: []string{}, SkillURIs: []string{}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := NewSurface(tc.opts)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("NewSurface = %+v\nwant           %+v", got, tc.want)
			}
		})
	}
}

func TestNewSurfaceDoesNotAliasInputs(t *testing.T) {
	uris := []string{"skill://b", "skill://a"}
	p := DefaultProfile()
	s := NewSurface(Options{Profile: &p, SkillsLoaded: true, SkillURIs: uris})
	uris[0] = "skill://changed"
	p.AllowedTools[0] = "graph_task_changed"
	if !slices.Equal(s.SkillURIs, []string{"skill://a", "skill://b"}) || !slices.Equal(s.Tools, sevenTools) {
		t.Errorf("surface changed with its inputs: %+v", s)
	}
	if uris[1] != "skill://a" {
		t.Errorf("NewSurface sorted the caller's slice: %v", uris)
	}
}

func TestSurfaceAllows(t *testing.T) {
	p := Profile{AllowedTools: []string{ToolClaim, ToolHeartbeat, ToolComplete}}
	s := NewSurface(Options{Profile: &p})
	for _, tool := range sevenTools {
		want := tool == ToolClaim || tool == ToolHeartbeat || tool == ToolComplete
		if got := s.Allows(tool); got != want {
			t.Errorf("Allows(%q) = %v, want %v", tool, got, want)
		}
	}
	if s.Allows("graph_task_requeue") || s.Allows("") {
		t.Errorf("Allows accepted a name that is not a tool")
	}
}
