package httpfront

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/internal/wire"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/principal"
)

// insufficientScope answers a request whose principal lacks the role the
// route needs: 403 with the RFC 6750 challenge error="insufficient_scope".
func (h *Handler) insufficientScope(w http.ResponseWriter, route string, p *principal.Principal, what, role string) {
	w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="graph-engineering-mcp", error="insufficient_scope", scope=%q`, role))
	h.refuse(w, route, http.StatusForbidden, "insufficient_scope", principal.MissingRole(p, what, []string{role}).Error())
}

// sessionOwners binds each legacy session to the principal whose
// initialize opened it: a legacy session's calls run in the context of its
// initialize request, so a request naming the session must come from the
// same principal, or it is answered as if the session did not exist.
type sessionOwners struct {
	mu sync.Mutex
	m  map[string]string
}

func (o *sessionOwners) set(id, name string, bound int, live func() map[string]bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string]string{}
	}
	o.m[id] = name
	if len(o.m) > bound {
		alive := live()
		for k := range o.m {
			if !alive[k] {
				delete(o.m, k)
			}
		}
	}
}

// owns reports whether the session id was opened by the principal name.
func (o *sessionOwners) owns(id, name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	got, ok := o.m[id]
	return ok && got == name
}

func (o *sessionOwners) forget(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, id)
}

// foreignSession reports whether q names a legacy session that another
// principal opened (or, with authentication, that none is known to own),
// and if so answers it like an unknown session: 404.
func (h *Handler) foreignSession(w http.ResponseWriter, q *mcpRequest) bool {
	if q.p == nil || q.sid == "" || h.owners.owns(q.sid, q.p.Name) {
		return false
	}
	wire.WriteError(w, &wire.Failure{Status: http.StatusNotFound, Code: jsonrpc.CodeInvalidRequest,
		Msg: "session not found: this Mcp-Session-Id is unknown or has ended; send initialize without Mcp-Session-Id to start a new session"})
	return true
}
