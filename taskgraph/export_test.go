package taskgraph

// IsCanonicalFastForTest exposes isCanonicalFast to the external tests.
var IsCanonicalFastForTest = isCanonicalFast
