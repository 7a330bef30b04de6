package manifest

import (
	"slices"
)

// The MCP tools a worker agent may call. These seven are the whole worker
// surface: operator operations (requeue, skip, prune) are human-only and are
// never exposed as tools.
const (
	ToolCancel    = "graph_task_cancel"
	ToolClaim     = "graph_task_claim"
	ToolComplete  = "graph_task_complete"
	ToolCreate    = "graph_task_create"
	ToolFail      = "graph_task_fail"
	ToolHeartbeat = "graph_task_heartbeat"
	ToolInspect   = "graph_task_inspect"
)

// AllTools lists the seven tools in ascending order. Do not modify it: the
// package keeps its own copy and ignores changes to this one.
var AllTools = allTools()

// allTools returns a fresh sorted slice of the seven tool names.
func allTools() []string {
	return []string{ToolCancel, ToolClaim, ToolComplete, ToolCreate, ToolFail, ToolHeartbeat, ToolInspect}
}

// IsHolderTool reports whether name is one of the tools a lease holder
// calls to keep or end its claim: heartbeat, complete, fail, cancel (the
// holder writes, which the HTTP front never refuses for a slot).
func IsHolderTool(name string) bool {
	switch name {
	case ToolHeartbeat, ToolComplete, ToolFail, ToolCancel:
		return true
	}
	return false
}

// operations maps each tool to the verb that names its operation in
// receipts and audit records.
var operations = map[string]string{
	ToolCancel:    "cancel",
	ToolClaim:     "claim",
	ToolComplete:  "complete",
	ToolCreate:    "create",
	ToolFail:      "fail",
	ToolHeartbeat: "heartbeat",
	ToolInspect:   "inspect",
}

// Operation returns the verb of tool ("create", "inspect", "claim",
// "heartbeat", "complete", "fail" or "cancel"), or "" if tool is not one of
// AllTools.
func Operation(tool string) string { return operations[tool] }

// ExtensionOperations are the receipt operations of the Tasks extension's
// methods, which act on a task without a tool call.
var ExtensionOperations = []string{"tasks/cancel", "tasks/get", "tasks/update"}

// isOperation reports whether op is the verb of one of the seven tools or
// one of ExtensionOperations.
func isOperation(op string) bool {
	for _, v := range operations {
		if v == op {
			return true
		}
	}
	for _, v := range ExtensionOperations {
		if v == op {
			return true
		}
	}
	return false
}

// isTool reports whether name is one of the seven tools.
func isTool(name string) bool {
	_, ok := operations[name]
	return ok
}

// MCP protocol versions the server speaks. The legacy versions negotiate
// through initialize; ModernVersion is the first without that handshake.
var (
	// LegacyVersions lists the handshake-era protocol versions in ascending
	// order. Do not modify it.
	LegacyVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}
	// Protocols lists every supported version, LegacyVersions then
	// ModernVersion, in ascending order. Do not modify it.
	Protocols = protocols()
)

// ModernVersion is the newest protocol version the server speaks.
const ModernVersion = "2026-07-28"

// protocols returns a fresh ascending slice of every supported version.
func protocols() []string {
	return []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", ModernVersion}
}

// ManifestURI is the MCP resource URI at which the server serves the
// capability manifest.
const ManifestURI = "graph-engineering://capabilities/manifest"

// Extension identifiers advertised in MCP capabilities.
const (
	// TasksExtension is the MCP tasks extension: graph tasks are surfaced
	// as MCP tasks, which needs both graph_task_create and
	// graph_task_inspect.
	TasksExtension = "io.modelcontextprotocol/tasks"
	// SkillsExtension is the MCP skills extension: skill documents served
	// as resources.
	SkillsExtension = "io.modelcontextprotocol/skills"
	// UIExtension is MCP Apps (SEP-1865): the workflow view as a ui://
	// resource, linked from graph_task_create and graph_task_inspect. It
	// reads through graph_task_inspect, so it needs that tool and resources.
	UIExtension = "io.modelcontextprotocol/ui"
	// UIResourceURI is the MCP App resource that shows a workflow.
	UIResourceURI = "ui://graph-engineering/workflow"
	// UIMIMEType is the MIME type of an MCP App's HTML.
	UIMIMEType = "text/html;profile=mcp-app"
)

// Options are the inputs to NewSurface: an operator profile plus the
// runtime switches that can narrow the surface further.
type Options struct {
	// Profile narrows the default surface; nil means DefaultProfile().
	Profile *Profile
	// DisableTasksExtension turns the tasks extension off whatever the
	// profile says.
	DisableTasksExtension bool
	// SkillsLoaded reports whether a skills directory was given and loaded.
	SkillsLoaded bool
	// SkillURIs are the resource URIs of the loaded skills.
	SkillURIs []string
}

// Surface is the effective least-authority surface: what the server
// actually exposes. Build it with NewSurface; Build(Surface) describes it.
type Surface struct {
	// Tools are the exposed tool names, ascending, without duplicates.
	Tools []string
	// Resources reports whether MCP resources are offered.
	Resources bool
	// TasksExtension reports whether TasksExtension is advertised.
	TasksExtension bool
	// SkillsExtension reports whether SkillsExtension is advertised.
	SkillsExtension bool
	// SkillURIs are the served skill resources, ascending, without
	// duplicates; empty (never nil) unless SkillsExtension is true.
	SkillURIs []string
	// UIExtension reports whether UIExtension is offered (to the clients
	// that declare it).
	UIExtension bool
}

// NewSurface computes the effective surface. It starts from the profile's
// Effective form (DefaultProfile when o.Profile is nil) and narrows it:
//
//   - Tools is the profile's allowed tools.
//   - Resources is the profile's Resources.
//   - TasksExtension is true only if the profile enables it, the profile
//     allows both graph_task_create and graph_task_inspect, and
//     o.DisableTasksExtension is false.
//   - SkillsExtension is true only if the profile enables skills and
//     resources and o.SkillsLoaded is true.
//   - SkillURIs is o.SkillURIs sorted and deduplicated when
//     SkillsExtension is true, and empty otherwise.
//   - UIExtension is true only if resources are offered and the profile
//     allows graph_task_inspect (the App's only read).
//
// No option can widen the surface beyond the profile.
func NewSurface(o Options) Surface {
	p := DefaultProfile()
	if o.Profile != nil {
		p = *o.Profile
	}
	e := p.Effective()
	s := Surface{
		Tools:           e.AllowedTools,
		Resources:       e.Resources,
		TasksExtension:  e.TasksExtension && !o.DisableTasksExtension,
		SkillsExtension: e.Skills && e.Resources && o.SkillsLoaded,
		SkillURIs:       []string{},
	}
	s.UIExtension = s.Resources && slices.Contains(s.Tools, ToolInspect)
	if s.SkillsExtension {
		s.SkillURIs = sortedUnique(o.SkillURIs)
	}
	return s
}

// Allows reports whether tool is exposed on s.
func (s Surface) Allows(tool string) bool {
	return slices.Contains(s.Tools, tool)
}

// sortedUnique returns a new ascending slice of the distinct values of in,
// never nil.
func sortedUnique(in []string) []string {
	out := append([]string{}, in...)
	slices.Sort(out)
	return slices.Compact(out)
}
