package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
)

// referenceProfile parses a profile with encoding/json, independently of
// ParseProfile's own JSON reader, following the rules ParseProfile documents.
// ok is false for every profile ParseProfile must refuse.
func referenceProfile(data []byte) (p Profile, ok bool) {
	data = bytes.Trim(data, " \t\r\n") // JSON whitespace only
	if !json.Valid(data) || len(data) == 0 || data[0] != '{' {
		return Profile{}, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil {
		return Profile{}, false
	}
	p = DefaultProfile()
	seen := map[string]bool{}
	var tasksOn, skillsOn bool
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return Profile{}, false
		}
		key := kt.(string)
		if seen[key] {
			return Profile{}, false
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return Profile{}, false
		}
		boolean := func() (bool, bool) {
			switch string(v) {
			case "true":
				return true, true
			case "false":
				return false, true
			}
			return false, false
		}
		switch key {
		case "allowed_tools":
			if v[0] != '[' {
				return Profile{}, false
			}
			var elems []json.RawMessage
			if err := json.Unmarshal(v, &elems); err != nil {
				return Profile{}, false
			}
			tools := []string{}
			for _, e := range elems {
				var name string
				if e[0] != '"' || json.Unmarshal(e, &name) != nil {
					return Profile{}, false
				}
				if !slices.Contains(sevenTools, name) || slices.Contains(tools, name) {
					return Profile{}, false
				}
				tools = append(tools, name)
			}
			p.AllowedTools = tools
		case "resources":
			if p.Resources, ok = boolean(); !ok {
				return Profile{}, false
			}
		case "tasks_extension":
			if p.TasksExtension, ok = boolean(); !ok {
				return Profile{}, false
			}
			tasksOn = p.TasksExtension
		case "skills":
			if p.Skills, ok = boolean(); !ok {
				return Profile{}, false
			}
			skillsOn = p.Skills
		default:
			return Profile{}, false
		}
	}
	e := p.Effective()
	if (tasksOn && !e.TasksExtension) || (skillsOn && !e.Skills) {
		return Profile{}, false
	}
	return e, true
}

// surfaceWithin reports whether s exposes nothing that wide does not.
func surfaceWithin(s, wide Surface) bool {
	for _, tool := range s.Tools {
		if !slices.Contains(wide.Tools, tool) {
			return false
		}
	}
	return (!s.Resources || wide.Resources) && (!s.TasksExtension || wide.TasksExtension) &&
		(!s.SkillsExtension || wide.SkillsExtension) && len(s.SkillURIs) <= len(wide.SkillURIs)
}

func FuzzParseProfile(f *testing.F) {
	for _, s := range []string{
		`{}`, " { } \n", `{"allowed_tools":[]}`,
		`{"allowed_tools":["graph_task_claim","graph_task_complete","graph_task_heartbeat"],"resources":false}`,
		`{"allowed_tools":["graph_task_create","graph_task_inspect"],"tasks_extension":true}`,
		`{"allowed_tools":["graph_task_claim"],"tasks_extension":true}`,
		`{"resources":false,"skills":true}`, `{"resources":false,"skills":false}`,
		`{"allowed_tools":["graph_task_claim","graph_task_claim"]}`,
		`{"allowed_tools":["graph_task_requeue"]}`, `{"allowed_tools":["GRAPH_TASK_CLAIM"]}`,
		`{"allowed_tools":"graph_task_claim"}`, `{"allowed_tools":null}`, `{"allowed_tools":[null]}`,
		`{"allowed_tools":[1]}`, `{"resources":"true"}`, `{"resources":1}`, `{"resources":null}`,
		`{"admin":true}`, `{"resources":true,"resources":false}`, `{"Resources":false}`,
		`{"\u0072esources":false}`, `{"allowed_tools":["graph_task_\u0063laim"]}`,
		`[]`, `null`, `true`, `"x"`, ``, `{`, `{"resources":false}}`, `{"resources":false} {}`,
		"\ufeff{}", "{\"resources\":false,}", "{\"allowed_tools\":[\"graph_task_claim\",]}",
		"{\"x\":\"\xff\"}", `{"x":"\ud800"}`, `{"x":1e400}`, `{"x":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
		"{\"resources\"\t:\rfalse\n}", "{\"resources\":\u00a0false}",
	} {
		f.Add([]byte(s))
	}
	def := DefaultProfile()
	wide := []Surface{
		NewSurface(Options{SkillsLoaded: true, SkillURIs: []string{"skill://a/SKILL.md"}}),
		NewSurface(Options{}),
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProfile(data)
		want, wantOK := referenceProfile(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidProfile) {
				t.Fatalf("ParseProfile(%q): error %v does not match ErrInvalidProfile", data, err)
			}
			if wantOK {
				t.Fatalf("ParseProfile(%q) refused a valid profile: %v (the reference reads %+v)", data, err, want)
			}
			return
		}
		if !wantOK {
			t.Fatalf("ParseProfile(%q) = %+v, but the profile is invalid by the documented rules", data, p)
		}
		if !reflect.DeepEqual(p, want) {
			t.Fatalf("ParseProfile(%q) = %+v, the reference reads %+v", data, p, want)
		}
		// Never wider than the default, and already in Effective form.
		for _, tool := range p.AllowedTools {
			if !slices.Contains(def.AllowedTools, tool) {
				t.Fatalf("ParseProfile(%q) allows %q, which the default does not", data, tool)
			}
		}
		if !reflect.DeepEqual(p, p.Effective()) {
			t.Fatalf("ParseProfile(%q) = %+v is not in Effective form %+v", data, p, p.Effective())
		}
		if p.TasksExtension && !(slices.Contains(p.AllowedTools, ToolCreate) && slices.Contains(p.AllowedTools, ToolInspect)) {
			t.Fatalf("ParseProfile(%q) = %+v offers the tasks extension without create and inspect", data, p)
		}
		if p.Skills && !p.Resources {
			t.Fatalf("ParseProfile(%q) = %+v serves skills without resources", data, p)
		}
		for _, o := range []Options{{}, {SkillsLoaded: true, SkillURIs: []string{"skill://a/SKILL.md"}}, {DisableTasksExtension: true}} {
			prof := p
			o.Profile = &prof
			if s := NewSurface(o); !surfaceWithin(s, wide[0]) || (!o.SkillsLoaded && !surfaceWithin(s, wide[1])) {
				t.Fatalf("ParseProfile(%q) widens the surface: %+v", data, s)
			}
		}
		// Re-serialised and parsed again, it is the same profile.
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseProfile(b)
		if err != nil {
			t.Fatalf("ParseProfile(%q) = %+v, whose encoding %s does not parse: %v", data, p, b, err)
		}
		if !reflect.DeepEqual(again.Effective(), p.Effective()) {
			t.Fatalf("round trip of %q: %+v became %+v", data, p, again)
		}
	})
}
