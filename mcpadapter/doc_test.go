package mcpadapter

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/graph-engineering/graph-engineering-mcp/manifest"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
	"github.com/graph-engineering/graph-engineering-mcp/skills"
)

// TestMCPDocumentationIsComplete keeps MCP.md true: it must name every tool,
// argument, served and unserved method, error code and limit the code has.
func TestMCPDocumentationIsComplete(t *testing.T) {
	b, err := os.ReadFile("../MCP.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	need := func(what, s string) {
		t.Helper()
		if !strings.Contains(doc, s) {
			t.Errorf("MCP.md does not mention the %s %s", what, s)
		}
	}
	for _, tool := range newFixture(t).srv.tools.Tools() {
		need("tool", "`"+tool.Name+"`")
		for name := range tool.InputSchema.(map[string]any)["properties"].(map[string]any) {
			need("argument", "`"+name+"`")
		}
	}
	for _, m := range ServedMethods() {
		need("method", "`"+m+"`")
	}
	for _, m := range UnservedMethods() {
		need("unserved method", "`"+m+"`")
	}
	for _, c := range ErrorCodes() {
		need("error code", fmt.Sprintf("`%d`", c))
	}
	for _, k := range manifest.ManifestKeys() {
		need("manifest key", "`"+k+"`")
	}
	m, err := manifest.Build(manifest.NewSurface(manifest.Options{}), map[string]int64{"maxStdioLineBytes": MaxStdioLineBytes})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range limitsOf(t, m) {
		need("limit", "`"+l.name+"`")
		for _, v := range l.values {
			need("value of limit "+l.name, v)
		}
	}
	for _, v := range manifest.Protocols {
		need("protocol version", "`"+v+"`")
	}
	need("extension", manifest.TasksExtension)
	for _, m := range []string{wire.MethodListen, wire.MethodAcknowledged, wire.MethodTaskStatus, wire.MethodCancelled, wire.MetaSubscriptionID} {
		need("subscription name", "`"+m)
	}
	need("listen bound", fmt.Sprintf("at most %d strings", MaxListenTaskIDs))
	need("listen bound", fmt.Sprintf("at most %d task ids", ListenBuffer))
	need("listen bound", fmt.Sprintf("every %d ms", ListenPoll.Milliseconds()))
	need("listen bound", fmt.Sprintf("At most %d streams", MaxListeners))
	need("extension", manifest.SkillsExtension)
	need("resource", manifest.ManifestURI)
	need("receipt key", tools.ReceiptMetaKey)
	need("error detail key", tools.ErrorMetaKey)
	need("poll interval", fmt.Sprint(tools.TaskPollIntervalMs))
	need("update bound", fmt.Sprint(tools.MaxUpdateKeys))
	need("update bound", fmt.Sprint(tools.MaxUpdateBytes))
	for name, v := range map[string]int{
		"SKILL.md bound": skills.MaxSkillMDBytes, "files per skill": skills.MaxFilesPerSkill, "bytes per skill": skills.MaxSkillBytes,
		"skills bound": skills.MaxSkills, "name length": skills.MaxNameLength, "description length": skills.MaxDescriptionLength,
		"compatibility length": skills.MaxCompatibilityLength, "stdio line bound": MaxStdioLineBytes,
		"stdio in-flight bound": MaxStdioInFlight, "stdio parked-claim bound": MaxStdioParkedClaims,
	} {
		need(name, fmt.Sprint(v))
	}
	need("stdio write timeout", fmt.Sprintf("deadline of %d s", int(StdioWriteTimeout.Seconds())))
	for _, rule := range []string{skills.RuleName, skills.RuleNameMismatch, skills.RuleDescription, skills.RuleFrontmatter,
		skills.RuleUnknownKey, skills.RuleGrantsAuthority, skills.RuleCredential, skills.RuleInternalHost, skills.RuleTooLarge,
		skills.RuleTooManyFiles, skills.RuleTooManySkills, skills.RuleSymlink, skills.RuleNotRegular, skills.RulePath,
		skills.RuleUnreadable, skills.RuleNestedRefused, skills.RuleNestedPrivate} {
		need("skill refusal rule", "`"+rule+"`")
	}
	for _, k := range []string{skills.MetaVersion, skills.MetaDigest, skills.MetaProvenance, skills.MetaRequirements} {
		need("skill resource _meta key", "`"+k+"`")
	}
}
