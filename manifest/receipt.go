package manifest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxTaskIDBytes bounds the task identifier a receipt binds.
const MaxTaskIDBytes = 128

// ErrInvalidReceipt reports receipt inputs that ReceiptSHA256 refused. The
// wrapping error names the field and the rule.
var ErrInvalidReceipt = errors.New("invalid receipt")

// Receipt ties the outcome of one operation to the manifest that was in
// force when it ran. Adapters attach it to tool results.
type Receipt struct {
	// ManifestSHA256 is the SHA256 of the manifest in force.
	ManifestSHA256 string `json:"manifestSha256"`
	// ReceiptSHA256 is ReceiptSHA256 of the manifest digest, operation,
	// task and generation.
	ReceiptSHA256 string `json:"receiptSha256"`
}

// receiptDoc is the object a receipt digest covers.
type receiptDoc struct {
	Generation     int64  `json:"generation"`
	ManifestSHA256 string `json:"manifestSha256"`
	Operation      string `json:"operation"`
	TaskID         string `json:"taskId"`
}

// ReceiptSHA256 returns the Digest of the RFC 8785 form of
//
//	{"generation": generation, "manifestSha256": manifestSHA256,
//	 "operation": operation, "taskId": taskID}
//
// binding an operation on a task at a lease generation to a manifest.
// manifestSHA256 must be a digest as Digest writes it; operation must be
// the verb of one of the seven tools (see Operation) or one of
// ExtensionOperations; taskID must be valid UTF-8 of at most MaxTaskIDBytes
// bytes and non-empty, except that a claim that found no task, a
// workflow outline (inspect by workflow_id alone) and a whole-graph create
// (graph_task_create with nodes, which makes many tasks) use "" with
// generation 0; generation must be between 0 and 2^53-1, so that every JSON
// reader sees the same integer.
// Violations are errors matching ErrInvalidReceipt.
func ReceiptSHA256(manifestSHA256, operation, taskID string, generation int64) (string, error) {
	if !ValidDigest(manifestSHA256) {
		return "", fmt.Errorf("%w: manifestSha256 must be sha256: followed by 64 lowercase hex digits (got %q)",
			ErrInvalidReceipt, manifestSHA256)
	}
	if !isOperation(operation) {
		verbs := make([]string, 0, len(AllTools)+len(ExtensionOperations))
		for _, t := range allTools() {
			verbs = append(verbs, Operation(t))
		}
		verbs = append(verbs, ExtensionOperations...)
		return "", fmt.Errorf("%w: operation %q is not one of %s", ErrInvalidReceipt, operation, strings.Join(verbs, ", "))
	}
	if taskID == "" && ((operation != Operation(ToolClaim) && operation != Operation(ToolInspect) && operation != Operation(ToolCreate)) || generation != 0) {
		return "", fmt.Errorf("%w: taskId must be non-empty, except for a claim that found no task, a workflow outline or a whole-graph create (generation 0)", ErrInvalidReceipt)
	}
	if len(taskID) > MaxTaskIDBytes || !utf8.ValidString(taskID) {
		return "", fmt.Errorf("%w: taskId must be valid UTF-8 of at most %d bytes (got %d bytes)",
			ErrInvalidReceipt, MaxTaskIDBytes, len(taskID))
	}
	if generation < 0 || generation > maxExactInteger {
		return "", fmt.Errorf("%w: generation must be between 0 and %d (got %d)", ErrInvalidReceipt, int64(maxExactInteger), generation)
	}
	if plainASCII(taskID) {
		// The canonical form written directly: the members are in RFC 8785
		// order already, the digest and the verb were checked to be plain
		// ASCII, an integer below 2^53 is its decimal digits, and a string
		// of printable ASCII without quote or backslash is itself, quoted.
		// DigestJSON of receiptDoc writes the same bytes
		// (TestReceiptDirectFormIsCanonical) after an encode and a parse.
		b := make([]byte, 0, 128+len(taskID))
		b = append(b, `{"generation":`...)
		b = strconv.AppendInt(b, generation, 10)
		b = append(b, `,"manifestSha256":"`...)
		b = append(b, manifestSHA256...)
		b = append(b, `","operation":"`...)
		b = append(b, operation...)
		b = append(b, `","taskId":"`...)
		b = append(b, taskID...)
		b = append(b, `"}`...)
		return Digest(b), nil
	}
	return DigestJSON(receiptDoc{
		Generation:     generation,
		ManifestSHA256: manifestSHA256,
		Operation:      operation,
		TaskID:         taskID,
	})
}

// plainASCII reports whether s is printable ASCII without a quote or a
// backslash: a JSON string that RFC 8785 writes with no escape.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// NewReceipt returns the Receipt for an operation on a task at a
// generation under the manifest with digest manifestSHA256. Its inputs
// are checked as ReceiptSHA256 checks them.
func NewReceipt(manifestSHA256, operation, taskID string, generation int64) (Receipt, error) {
	sha, err := ReceiptSHA256(manifestSHA256, operation, taskID, generation)
	if err != nil {
		return Receipt{}, err
	}
	return Receipt{ManifestSHA256: manifestSHA256, ReceiptSHA256: sha}, nil
}
